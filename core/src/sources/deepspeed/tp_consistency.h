#pragma once
// What only the tensor ranks of a stage side by side show: params that the tensor-parallel rules call
// replicated (layer norms, biases of row-parallel layers) must hold the same 16-bit weights and fp32 masters
// on every tensor rank; DeepSpeed's ds_to_universal.py asserts the same, and a drift means the ranks trained
// apart. A part of deepspeed::diagnose.
#include <optional>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/tp_rules.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::deepspeed::detail {

// `job`: the checkpoint opened as the whole job. Reads only the replicated params' slices.
std::vector<analysis::Finding> tp_consistency_findings(const Checkpoint& job,
                                                       const std::optional<TpRules>& rules,
                                                       Progress* progress);

}  // namespace ckptdoc::deepspeed::detail
