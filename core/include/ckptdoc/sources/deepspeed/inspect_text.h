#pragma once
// `ckptdoc inspect`'s text for a checkpoint the DeepSpeed family reads into its catalog (not a weights-only
// source, which the weights reader prints): the catalog with what only DeepSpeed records (ZeRO stage,
// wrapper, files and their roles, loss scaler, universal and AutoEP layouts), groups, files and problems.
#include <string>

#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::deepspeed {

// The text, each line ending in a newline; `layout` adds every partition's fragments.
std::string inspect_text(const Checkpoint& ckpt, bool layout);

// One line for convert's progress: "ZeRO-2, fp16, dp 2, DeepSpeed 0.12.6", "universal checkpoint of a
// BF16_Optimizer, bf16 run saved at dp 2".
std::string summary_text(const Catalog& catalog);

}  // namespace ckptdoc::deepspeed
