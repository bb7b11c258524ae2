#pragma once
// ZeRO-3 as DeepSpeed 0.19's ds_to_universal.py converts it (its stage-3 path at tensor-parallel size 1):
// each param's fp32 master and moments as one bare flat float32 tensor (no step.pt, no cat_dim), the Adam
// step and hyper-parameters in zero/optimizer_state.pt, which is dp rank 0's whole optimizer_state_dict plus
// 'param_groups', and every model-states file copied. Sub-groups need nothing of their own: the catalog's
// flat groups are the sub-groups, as the converter's param_shapes and the saved state lists are.
#include <string>
#include <vector>

#include "ckptdoc/format/value.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::universal::detail {

// Throws ckptdoc::Error for a ZeRO-3 checkpoint this conversion does not handle, saying what and why.
void check_zero3_input(const deepspeed::Checkpoint& ckpt, const TargetVersion& target);

// zero/optimizer_state.pt as _save_optimizer_state_stage3 writes it.
Value zero3_optimizer_state_root(const deepspeed::Checkpoint& ckpt);

// What 0.19's ZeRO-3 universal loader makes of this checkpoint that a user should know, in words.
std::vector<std::string> zero3_load_notes(const deepspeed::Checkpoint& ckpt);

}  // namespace ckptdoc::universal::detail
