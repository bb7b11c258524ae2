#pragma once
// One side of a diff from any path ckptdoc reads, for the CLI's `diff` and the apps' Diff tab alike: the
// catalog's sources (DeepSpeed, universal, Hugging Face, weights files) give what DiffWhat names; the
// self-reporting ones (DCP, Accelerate, Megatron-core) their weights as their export writes them.
#include <memory>
#include <string>

#include "ckptdoc/analysis/diff.h"

namespace ckptdoc::sources {

struct OpenedDiffSide {
  analysis::DiffSide side;
  std::shared_ptr<const void> keep_alive;  // what the side's tensors read from, open while they are compared
};

// Throws ckptdoc::Error: a source that cannot be compared (its refusal), an unreadable path, or
// --what exp_avg / exp_avg_sq for a side that holds weights only (InvalidRequest).
OpenedDiffSide open_diff_side(const std::string& path, analysis::DiffWhat what);

}  // namespace ckptdoc::sources
