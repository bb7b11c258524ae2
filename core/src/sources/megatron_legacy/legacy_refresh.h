#pragma once
// `repair --refresh-fp32` of a legacy Megatron save: in a copy of the folder, every fp32 main of
// optimizer.fp32_from_fp16_params that legacy_mains.h places is set to its bf16/fp16 weight upcast, by
// rewriting that main's storage record of model_optim_rng.pt in place (same size, its CRC-32 fields updated:
// sources/dcp/rewrite_records.h). The pickle, every other record and every other file are the input's bytes.
// With the distributed optimizer, distrib_optim.pt's coalesced "param" record is rewritten instead: each
// placed main's range := its weight upcast, the alignment gaps as stored (legacy_distopt.h). What
// Megatron-LM's optimizer.reload_model_params() would have done after a --finetune load (Megatron-LM #174).
#include <string>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::megatron_legacy {

struct LegacyRefresh {
  std::string output;          // the new folder
  size_t mains = 0;            // mains refreshed (one storage record each; distrib_optim.pt: one per file)
  size_t rank_files = 0;       // rank folders whose mains were rewritten
  size_t params = 0;           // distinct param names refreshed
  bool distrib_optim = false;  // the mains were distrib_optim.pt's
};

// Throws ckptdoc::Error before anything is published: Unsupported naming the rank file when a main cannot be
// placed (legacy_mains.h says why), is not a whole contiguous float32 storage of its own, or the file is not
// a zip torch.save; Corrupt/Truncated for a rank file that cannot be read; InvalidRequest for an output
// inside the input or existing. After writing, the copy is read again and every main must be its weight
// upcast.
LegacyRefresh refresh_mains(const std::string& path, const std::string& output, Progress* progress);

}  // namespace ckptdoc::megatron_legacy
