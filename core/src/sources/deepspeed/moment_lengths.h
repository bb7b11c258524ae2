#pragma once
// Optimizer moments whose lengths do not fit the partition layout, reported as one finding: after
// load_checkpoint(..., load_module_strict=False) into a model with added layers every moment tensor of every
// rank is short, and eight near-identical errors would hide the one cause.
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed::detail {

struct MomentLengthMismatch {
  int rank = 0, group = 0;
  std::string key;   // "exp_avg", "exp_avg_sq", ...
  std::string file;  // the rank's optimizer file
  int64_t saved = 0, expected = 0;
};

// The finding (code "optimizer-state-shape-mismatch") for all mismatches of a checkpoint; none when empty.
std::vector<Problem> moment_length_problems(const std::vector<MomentLengthMismatch>& mismatches);

}  // namespace ckptdoc::deepspeed::detail
