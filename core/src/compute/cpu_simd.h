#pragma once
// AVX2 + F16C + FMA kernels of the CPU backend, chosen at run time when avx2_usable() says the processor and
// the OS support them. Each kernel processes the largest multiple of 8 elements of [begin, end) and returns
// how many that was; the caller finishes the ragged tail with the portable scalar code and merges.
//
// Every per-element decision is the one of compute/element_ops.h, made with the same integer operations on
// IEEE bits, so counts and histograms are identical to the scalar code's. Sums are accumulated in 8 double
// lanes and reduced in a fixed order: deterministic, but not bit-identical to the scalar code's sequential
// sums. min/max are exact (the sign of a zero minimum or maximum included).
//
// Ranges must hold fewer than 2^31 elements (32-bit counters); the CPU backend hands out 2^20-element chunks.
#include <cstddef>

#include "ckptdoc/compute/statistics.h"
#include "ckptdoc/dtype.h"

namespace ckptdoc::compute::simd {

// True when this build has the kernels and the CPU runs AVX2, FMA and F16C with the OS saving YMM state.
bool avx2_usable();

// Statistics of `data` (F16, BF16 or F32) over the processed part of [begin, end), into `out`.
size_t values(const void* data, DType dtype, size_t begin, size_t end, ValueStats& out);

// lp (F16, BF16 or F32) vs fp32 over the processed part of [begin, end), into `div`; with lp_stats/fp32_stats
// also the value statistics of either side in the same pass, identical to what values() gives.
size_t divergence(const void* lp, DType lp_dtype, const float* fp32, size_t begin, size_t end,
                  DivergenceStats& div, ValueStats* lp_stats, ValueStats* fp32_stats);

}  // namespace ckptdoc::compute::simd
