#pragma once
// The sides of `ckptdoc diff` that a DeepSpeed checkpoint gives: consolidated fp32 masters (with buffers and
// frozen params, as zero_to_fp32.py exports them), the 16-bit module weights, or an Adam moment, streamed
// through the export's consolidation. Here and not in analysis/ because it reads a deepspeed::Checkpoint; the
// comparison of two sides is analysis::diff (analysis/diff.h).
#include <vector>

#include "ckptdoc/analysis/diff.h"
#include "ckptdoc/format/safetensors.h"              // NamedTensor
#include "ckptdoc/sources/deepspeed/open_options.h"  // Checkpoint
#include "ckptdoc/task/progress.h"

namespace ckptdoc::deepspeed {

// The tensors of one side for `what` (lazily produced; nothing is read yet). Throws ckptdoc::Error when the
// source has no such tensors (moments of a weights file, fp32 of a checkpoint without ZeRO partitions).
std::vector<NamedTensor> diff_tensors(const Checkpoint& ckpt, analysis::DiffWhat what);

// The side `what` names of a checkpoint (diff_tensors, described as "DeepSpeed checkpoint /x (fp32)").
analysis::DiffSide diff_side(const Checkpoint& ckpt, analysis::DiffWhat what);

// Two checkpoints compared: analysis::diff of their diff_side()s.
analysis::DiffResult diff(const Checkpoint& a, const Checkpoint& b, const analysis::DiffOptions& options = {},
                          Progress* progress = nullptr);

}  // namespace ckptdoc::deepspeed
