#pragma once
// `repair --reset-optimizer` of a Megatron-core save whose Adam state is in model space
// (optimizer.state.exp_avg.<key> / exp_avg_sq.<key>: Float16OptimizerWithFloat16Params, and
// DistributedOptimizer fully_reshardable): a copy of the iteration folder (and the tracker, when the save
// folder was named) whose moments are zero and whose optimizer step, kept in the common state, is 0:
// common.pt, or megatron-core 0.19's DCP bytes item common_state/shard_0_1 (torch.save([state]) inside a
// .distcp file, its record rewritten in place in the copy with the same length, so .metadata and every offset
// stay the input's). megatron-core keeps that step in one of two places (megatron/core/optimizer/optimizer.py
// sharded_state_dict: `common_step`, a 0-d float tensor in optimizer.state; distrib_optimizer.py state_dict:
// a float `step` in every param group, without Apex or TE): the tensor's storage record or the floats' 8
// bytes in data.pkl are rewritten in place, so every other byte of the common state, its pickle included, is
// the input's. Loaded, torch's Adam then holds step 0 and zero moments, which is a fresh Adam's state: its
// first step makes the step 1 before the bias correction. The fp32 main params, weights, param groups (lr
// ...) and args are kept. The input is never written.
#include <string>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::megatron {

struct ResetResult {
  std::string output;  // the folder written
  std::string
      iteration_dir;         // the iteration folder inside it (== output when the iteration folder was named)
  size_t params = 0;         // params whose moments were zeroed
  size_t tensors = 0;        // moment tensors zeroed
  size_t records = 0;        // storage records rewritten (moments)
  std::string common_where;  // where the step was: "common.pt" or "common_state/shard_0_1 (<file>.distcp)"
  std::string step_where;    // "optimizer.state.common_step" or "optimizer.param_groups[*].step"
  double step_before = 0;    // the step the input held
  size_t steps = 0;          // step values set to 0 (1 tensor, or one per param group)
  bool integrity_dropped = false;  // the input had integrity.json; the copy has none
};

// A save in bucket space (optimizer.distributed.*) is reset by reset_bucket_optimizer.h.
// Throws ckptdoc::Error: InvalidRequest (output exists, or inside the input), Unsupported (no moments,
// another optimizer's state, no step megatron-core writes in common.pt, a
// record that cannot be rewritten in place), and the read errors of the checkpoint. Verifies the copy before
// publishing it: the moments read back as zeros, the step as 0, the rest of the common state as the input's.
// `progress` counts the copy's bytes, then the moments zeroed, and is checked for a cancel (Cancelled)
// between steps: nothing is then published.
ResetResult reset_optimizer(const std::string& path, const std::string& output, Progress* progress = nullptr);

}  // namespace ckptdoc::megatron
