#pragma once
// A snapshot back to an ordinary DeepSpeed checkpoint folder (`ckptdoc convert SNAPSHOT -o CKPT`): every
// DeepSpeed file the snapshot holds written as the torch.save file DeepSpeed would have written (same pickle
// tree, same storages), plus `latest` and the zero_to_fp32.py DeepSpeed copied beside it. Resuming from a
// snapshot is then engine.load_checkpoint(CKPT).
#include <string>
#include <vector>

#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::snapshot {

struct ToCheckpointOptions {
  std::string tag;     // tag folder to write; empty: "global_step<N>", as engine.save_checkpoint names it
  bool force = false;  // replace an existing non-empty output folder
};

struct ToCheckpointResult {
  std::string save_dir, tag;
  std::vector<std::string> files;  // written, relative to save_dir
  uint64_t bytes = 0;
  double seconds = 0;
  // Each written file re-opened and compared with the snapshot's: pickle tree and every storage's bytes.
  std::vector<std::string> mismatches;          // empty when verified
  std::vector<std::string> invariant_failures;  // DeepSpeed loader invariants the output breaks
  bool verified() const { return mismatches.empty() && invariant_failures.empty(); }
};

// `snapshot` must be a Checkpoint opened from a snapshot (snapshot() != null). Writes into a temporary folder
// and renames it to `out_dir` when complete (nothing half-written is ever at `out_dir`), then verifies.
// Throws ckptdoc::Error when the output folder is unusable or a file cannot be read or written.
ToCheckpointResult convert_to_checkpoint(const deepspeed::Checkpoint& snapshot, const std::string& out_dir,
                                         const ToCheckpointOptions& options = {},
                                         Progress* progress = nullptr);

}  // namespace ckptdoc::snapshot
