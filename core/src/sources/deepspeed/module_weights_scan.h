#pragma once
// A DeepSpeed checkpoint without optimizer state (DeepSpeed 0.17.6-0.18.4 bf16 at ZeRO stage 0, or a save
// without the optimizer) has no param groups: nothing names the trainable params or holds masters. Its model
// file still holds the module's weights, so those are read for NaN/Inf and all-zero matrices like a weights
// file. A part of deepspeed::diagnose.
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::deepspeed::detail {

// Whether `ckpt` is such a checkpoint: DeepSpeed files, no param group, a module state dict with entries.
bool has_only_module_weights(const Checkpoint& ckpt);

// The value pass over the module's tensors of the model file (its params as rows, its findings). Throws
// ckptdoc::Error naming the model file when a tensor cannot be read.
analysis::Report scan_module_weights(const Checkpoint& ckpt, const analysis::DiagnoseOptions& options,
                                     Progress* progress);

}  // namespace ckptdoc::deepspeed::detail
