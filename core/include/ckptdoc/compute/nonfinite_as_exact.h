#pragma once
// The stale-main comparisons' divergence (Megatron-core's and legacy Megatron-LM's fp32 mains against their
// 16-bit weights): a main that is NaN where its weight is NaN (or the same Inf) rounds to it. Such an element
// is for the NaN/Inf findings to name, not a main that differs from its weight, so the pair counts as exact.
#include <cstdint>
#include <vector>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/dtype.h"

namespace ckptdoc {

// Backend::divergence of `main.size()` weights of dtype `lp` (bf16 or fp16) at `weight` against `main`, with
// matching NaN/Inf pairs compared as zeros (exact, out of the NaN/Inf count). The pairs are looked at only
// when the plain divergence saw a NaN/Inf.
DivergenceStats divergence_nonfinite_as_exact(Backend& backend, const uint8_t* weight, DType lp,
                                              std::vector<float> main);

}  // namespace ckptdoc
