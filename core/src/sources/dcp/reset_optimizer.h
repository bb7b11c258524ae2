#pragma once
// `repair --reset-optimizer` of a DCP folder holding torch Adam/AdamW state the way get_state_dict flattens
// it (FSDP2/torchtitan, Accelerate's optimizer_<i>/): every `optimizer.state.<fqn>.{exp_avg, exp_avg_sq,
// max_exp_avg_sq}` record zeroed and every `optimizer.state.<fqn>.step` set to 0, written in place in a copy
// (same record sizes, new CRC-32 fields: rewrite_records.h). torch's Adam then resumes exactly as a fresh
// optimizer: its first step increments step to 1 before the bias correction (torch/optim/adam.py,
// _single_tensor_adam: `step_t += 1`, then `1 - beta1 ** step`), from zero moments, as a new Adam's state
// (step 0, zeros) does.
#include <string>
#include <vector>

#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::dcp {

struct ResetCounts {
  size_t params = 0;   // params whose state was reset
  size_t tensors = 0;  // moment and step tensors zeroed
  size_t records = 0;  // storage records rewritten (replicas of per-rank saves included)
};

// Zeroes, in `copy_dir` (a byte copy of `in`'s folder), every Adam moment and step of `in`, then re-opens the
// copy and checks that each reads back as zeros. Throws ckptdoc::Error Unsupported naming `in`'s folder when
// it holds no Adam moments, an optimizer state field other than Adam's (another optimizer: zero is not its
// fresh state), a step that is not a tensor, or a record that cannot be rewritten in place. `progress`
// counts the tensors reset and is checked for a cancel (Cancelled) between records.
ResetCounts reset_adam_state(const Checkpoint& in, const std::string& copy_dir, Progress* progress = nullptr);

}  // namespace ckptdoc::dcp
