#pragma once
// megatron-core 0.18+'s integrity.json in an iteration folder: {"algorithm": "sha256", "files": {NAME: HEX}},
// written by rank 0 after every other file when save(..., verify_integrity=True) (Megatron-LM
// --verify-integrity). It lists each regular file directly in the folder but itself, by name, with the
// lowercase hex sha256 of its bytes (megatron/core/dist_checkpointing/validation.py save_integrity_manifest,
// NVIDIA/Megatron-LM 970c2540, core_v0.18.0). megatron-core's load(..., verify_integrity=True) hashes each
// listed file and refuses the checkpoint on any mismatch or missing file; it does not look for files the list
// lacks.
#include <string>
#include <vector>

#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::megatron {

struct IntegrityCheck {
  bool present = false;   // integrity.json is in the folder
  bool readable = false;  // and reads as a manifest (else a megatron-integrity-unreadable problem)
  bool verified = false;  // every listed file was hashed (asked, and the manifest readable)
  size_t listed = 0;      // files it lists
  size_t matched = 0;     // of them, hashed and equal to the list's sha256
  // megatron-integrity-mismatch / -missing (errors), -unlisted (warning), -unreadable (error); `file` is the
  // name in the folder.
  std::vector<dcp::Problem> problems;
};

// Reads `iteration_dir`'s integrity.json (if any), checks that every listed file is there and every file
// there is listed; with `verify`, hashes every listed file as megatron-core does (1 MiB reads, bounded
// memory), on the shared pool, counting bytes on `progress` (may be null). Throws Cancelled when
// progress->cancel() was called; every other failure is a problem.
IntegrityCheck check_integrity(const std::string& iteration_dir, bool verify, Progress* progress);

}  // namespace ckptdoc::megatron
