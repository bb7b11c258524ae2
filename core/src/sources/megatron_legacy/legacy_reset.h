#pragma once
// `repair --reset-optimizer` of a legacy Megatron save (docs/megatron-legacy-format.md): a copy whose Adam
// moments are zero and whose optimizer step is 0, which torch's Adam then holds as a fresh one's state (its
// first step makes the step 1 before the bias correction). The fp32 main params (the weights' masters), the
// weights, the param groups (lr ...), the args and every other entry are kept, byte for byte.
//  - Non-distributed optimizer (Float16OptimizerWithFloat16Params): model_optim_rng.pt's
//    optimizer.optimizer.state[i] = {step: 0-d float32, exp_avg, exp_avg_sq} (torch's Adam): each of those
//    storage records is zeroed in place (same size, CRC-32 updated: sources/dcp/rewrite_records.h).
//  - Distributed optimizer: distrib_optim.pt's coalesced exp_avg / exp_avg_sq records are zeroed (the
//    "param" record, the mains, kept), and the float `step` of each param group in model_optim_rng.pt's
//    optimizer.optimizer.param_groups (DistributedOptimizer.state_dict without Apex/TE) gets 0.0's 8 bytes in
//    data.pkl, the pickle's length and every other byte kept.
#include <string>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::megatron_legacy {

struct LegacyReset {
  std::string output;          // the new folder
  size_t rank_files = 0;       // rank folders reset
  size_t states = 0;           // torch Adam states zeroed (one per param; distributed: 0, in buffers)
  size_t moments = 0;          // moment tensors zeroed (exp_avg and exp_avg_sq)
  uint64_t elements = 0;       // their elements
  size_t steps = 0;            // step values set to 0 (one per state, or one per param group)
  double step_before = 0;      // the largest step the input held
  size_t mains_kept = 0;       // fp32 main tensors kept as stored (distributed: "param" buffers)
  size_t records = 0;          // storage records (and data.pkl) rewritten
  bool distrib_optim = false;  // the moments were distrib_optim.pt's
};

// Throws ckptdoc::Error before anything is published: Unsupported naming the file when its optimizer state
// is not torch's Adam as megatron-core saves it (another field, a param-group step of Apex/TE, an older
// uncoalesced distrib_optim.pt, a moment sharing its storage, a non-zip file, no state at all);
// Corrupt/Truncated for an unreadable file; InvalidRequest for an output inside the input or existing.
// The copy is read again before it is published: each rank file must be the input's tree with the moments
// zero and the step 0, nothing else changed.
LegacyReset reset_optimizer(const std::string& path, const std::string& output, Progress* progress);

}  // namespace ckptdoc::megatron_legacy
