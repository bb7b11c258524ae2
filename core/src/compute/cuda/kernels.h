#pragma once
// Launch wrappers of the CUDA kernels (defined in kernels.cu). Plain C++ plus the CUDA runtime types.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ckptdoc::cuda {

// Per-block partial results, reduced on the host in block order (deterministic for a given grid).
struct DivPartial {
  unsigned long long exact, nonfinite;
  double max_abs, sum_abs, sum_sq_diff, sum_sq_lp, sum_sq_fp32;
};
struct ValPartial {
  unsigned long long cls[6];  // compute::ValueClass order
  unsigned long long negatives;
  double sum, sum_sq, min, max;
};

// Histogram arrays in device memory (unsigned long long, accumulated with atomics across launches).
// Divergence: kLogSlots slots of |diff| then kBuckets ULP buckets. Values: kLogSlots of all, kLogSlots of
// negatives.
int divergence_hist_size();
int value_hist_size();

// lp_kind: 0 = F16, 1 = BF16, 2 = F32. `partials` holds `blocks` entries.
cudaError_t launch_divergence(const void* lp, int lp_kind, const float* fp32, size_t n, DivPartial* partials,
                              int blocks, unsigned long long* hist, cudaStream_t stream);
// kind: 0 = F16, 1 = BF16, 2 = F32, 3 = F64.
cudaError_t launch_values(const void* data, int kind, size_t n, ValPartial* partials, int blocks,
                          unsigned long long* hist, cudaStream_t stream);
cudaError_t launch_upcast(const uint16_t* in, bool bf16, float* out, size_t n, cudaStream_t stream);
cudaError_t launch_downcast(const float* in, bool bf16, uint16_t* out, size_t n, cudaStream_t stream);

constexpr int kThreads = 256;

}  // namespace ckptdoc::cuda
