// CUDA kernels of the compute backend. Every per-element decision comes from compute/element_ops.h, which
// the CPU backend uses too, so histogram counts agree exactly; sums are per-thread doubles reduced per block
// (warp shuffles, then warps in order) and returned as per-block partials for an ordered host reduction.
#include <limits>

#include "compute/cuda/kernels.h"
#include "compute/element_ops.h"

namespace ckptdoc::cuda {
namespace {

using namespace ckptdoc::compute;

constexpr int kWarps = kThreads / 32;
constexpr int kUlp = UlpHistogram::kBuckets;
constexpr int kDivHist = kLogSlots + kUlp;
constexpr int kValHist = 2 * kLogSlots;

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};
struct MinOp {
  __device__ double operator()(double a, double b) const { return fmin(a, b); }
};

// Reduces v over the block; the result is valid in thread 0. Fixed order: shuffles, then warps 0..7.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // smem may still be read by the previous reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T r = smem[0];
    for (int w = 1; w < kWarps; ++w) r = op(r, smem[w]);
    v = r;
  }
  return v;
}

__device__ __forceinline__ void flush_hist(const unsigned int* s_hist, unsigned long long* hist, int size) {
  __syncthreads();
  for (int i = threadIdx.x; i < size; i += blockDim.x)
    if (s_hist[i] != 0) atomicAdd(&hist[i], static_cast<unsigned long long>(s_hist[i]));
}

// ---- divergence: one pass for the sums, the |diff| log histogram and the ULP histogram ----
struct DivThread {
  unsigned long long exact = 0, nonfinite = 0, ulp0 = 0;
  double max_abs = 0, sum_abs = 0, sum_sq_diff = 0, sum_sq_lp = 0, sum_sq_fp32 = 0;

  __device__ __forceinline__ void add(const DivergenceElement& e, unsigned int* s_hist) {
    exact += e.exact ? 1ull : 0ull;
    if (e.ulp_bucket == 0)
      ++ulp0;  // the common case stays in a register instead of a 32-way shared atomic conflict
    else
      atomicAdd(&s_hist[kLogSlots + e.ulp_bucket], 1u);
    atomicAdd(&s_hist[e.log_slot], 1u);
    if (!e.finite) {
      ++nonfinite;
      return;
    }
    const double d = e.abs_diff, l = e.lp, m = e.master;
    max_abs = fmax(max_abs, d);
    sum_abs += d;
    sum_sq_diff += d * d;
    sum_sq_lp += l * l;
    sum_sq_fp32 += m * m;
  }
};

template <int Kind>
__device__ __forceinline__ DivergenceElement div_one(const void* lp, size_t i, float m) {
  if constexpr (Kind == 2) {
    return divergence_element32(static_cast<const float*>(lp)[i], m);
  } else {
    return divergence_element16(static_cast<const uint16_t*>(lp)[i], m, Kind == 1);
  }
}

template <int Kind>
__global__ void __launch_bounds__(kThreads)
    divergence_kernel(const void* __restrict__ lp, const float* __restrict__ fp32, size_t n,
                      DivPartial* partials, unsigned long long* hist) {
  __shared__ unsigned int s_hist[kDivHist];
  __shared__ double s_d[kWarps];
  __shared__ unsigned long long s_u[kWarps];
  for (int i = threadIdx.x; i < kDivHist; i += blockDim.x) s_hist[i] = 0;
  __syncthreads();

  DivThread t;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t groups = n / 4;  // 16-byte fp32 loads; lp as 8-byte (16-bit) or 16-byte (fp32) loads
  for (size_t g = tid; g < groups; g += stride) {
    const float4 m = reinterpret_cast<const float4*>(fp32)[g];
    if constexpr (Kind == 2) {
      const float4 l = reinterpret_cast<const float4*>(lp)[g];
      t.add(divergence_element32(l.x, m.x), s_hist);
      t.add(divergence_element32(l.y, m.y), s_hist);
      t.add(divergence_element32(l.z, m.z), s_hist);
      t.add(divergence_element32(l.w, m.w), s_hist);
    } else {
      const uint2 raw = reinterpret_cast<const uint2*>(lp)[g];
      constexpr bool bf = Kind == 1;
      t.add(divergence_element16(static_cast<uint16_t>(raw.x & 0xffffu), m.x, bf), s_hist);
      t.add(divergence_element16(static_cast<uint16_t>(raw.x >> 16), m.y, bf), s_hist);
      t.add(divergence_element16(static_cast<uint16_t>(raw.y & 0xffffu), m.z, bf), s_hist);
      t.add(divergence_element16(static_cast<uint16_t>(raw.y >> 16), m.w, bf), s_hist);
    }
  }
  for (size_t i = groups * 4 + tid; i < n; i += stride) t.add(div_one<Kind>(lp, i, fp32[i]), s_hist);

  if (t.ulp0) atomicAdd(&s_hist[kLogSlots], static_cast<unsigned int>(t.ulp0));
  flush_hist(s_hist, hist, kDivHist);

  DivPartial p;
  p.exact = block_reduce(t.exact, SumOp{}, s_u);
  p.nonfinite = block_reduce(t.nonfinite, SumOp{}, s_u);
  p.max_abs = block_reduce(t.max_abs, MaxOp{}, s_d);
  p.sum_abs = block_reduce(t.sum_abs, SumOp{}, s_d);
  p.sum_sq_diff = block_reduce(t.sum_sq_diff, SumOp{}, s_d);
  p.sum_sq_lp = block_reduce(t.sum_sq_lp, SumOp{}, s_d);
  p.sum_sq_fp32 = block_reduce(t.sum_sq_fp32, SumOp{}, s_d);
  if (threadIdx.x == 0) partials[blockIdx.x] = p;
}

// ---- value statistics ----
struct ValThread {
  unsigned long long sub = 0, zero = 0, nan = 0, pinf = 0, ninf = 0, neg = 0;
  double sum = 0, sum_sq = 0, mn = std::numeric_limits<double>::infinity(),
         mx = -std::numeric_limits<double>::infinity();

  __device__ __forceinline__ void add(int cls, double v, int slot, unsigned int* s_hist) {
    atomicAdd(&s_hist[slot], 1u);
    if (v < 0) {
      ++neg;
      atomicAdd(&s_hist[kLogSlots + slot], 1u);
    }
    switch (cls) {
      case kSubnormal:
        ++sub;
        break;
      case kZero:
        ++zero;
        break;
      case kNan:
        ++nan;
        return;
      case kPosInf:
        ++pinf;
        return;
      case kNegInf:
        ++ninf;
        return;
      default:
        break;
    }
    sum += v;
    sum_sq += v * v;
    mn = fmin(mn, v);
    mx = fmax(mx, v);
  }
};

template <int Kind>
__device__ __forceinline__ void value_one(ValThread& t, const void* data, size_t i, unsigned int* s_hist) {
  if constexpr (Kind == 0 || Kind == 1) {
    const uint16_t h = static_cast<const uint16_t*>(data)[i];
    const float f = Kind == 1 ? bf16_to_f32(h) : f16_to_f32(h);
    t.add(Kind == 1 ? classify_bf16(h) : classify_f16(h), f, log_slot_f32(f), s_hist);
  } else if constexpr (Kind == 2) {
    const float f = static_cast<const float*>(data)[i];
    t.add(classify_f32(f32_bits(f)), f, log_slot_f32(f), s_hist);
  } else {
    const double d = static_cast<const double*>(data)[i];
    t.add(classify_f64(f64_bits(d)), d, log_slot_f64(d), s_hist);
  }
}

template <int Kind>
__global__ void __launch_bounds__(kThreads)
    values_kernel(const void* __restrict__ data, size_t n, ValPartial* partials, unsigned long long* hist) {
  __shared__ unsigned int s_hist[kValHist];
  __shared__ double s_d[kWarps];
  __shared__ unsigned long long s_u[kWarps];
  for (int i = threadIdx.x; i < kValHist; i += blockDim.x) s_hist[i] = 0;
  __syncthreads();

  ValThread t;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  if constexpr (Kind == 0 || Kind == 1) {  // 8 halves per 16-byte load
    const size_t groups = n / 8;
    for (size_t g = tid; g < groups; g += stride) {
      const uint4 raw = reinterpret_cast<const uint4*>(data)[g];
      const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const uint16_t h = static_cast<uint16_t>((w[k / 2] >> (16 * (k % 2))) & 0xffffu);
        const float f = Kind == 1 ? bf16_to_f32(h) : f16_to_f32(h);
        t.add(Kind == 1 ? classify_bf16(h) : classify_f16(h), f, log_slot_f32(f), s_hist);
      }
    }
    for (size_t i = groups * 8 + tid; i < n; i += stride) value_one<Kind>(t, data, i, s_hist);
  } else if constexpr (Kind == 2) {
    const size_t groups = n / 4;
    for (size_t g = tid; g < groups; g += stride) {
      const float4 v = reinterpret_cast<const float4*>(data)[g];
      t.add(classify_f32(f32_bits(v.x)), v.x, log_slot_f32(v.x), s_hist);
      t.add(classify_f32(f32_bits(v.y)), v.y, log_slot_f32(v.y), s_hist);
      t.add(classify_f32(f32_bits(v.z)), v.z, log_slot_f32(v.z), s_hist);
      t.add(classify_f32(f32_bits(v.w)), v.w, log_slot_f32(v.w), s_hist);
    }
    for (size_t i = groups * 4 + tid; i < n; i += stride) value_one<Kind>(t, data, i, s_hist);
  } else {
    for (size_t i = tid; i < n; i += stride) value_one<Kind>(t, data, i, s_hist);
  }
  flush_hist(s_hist, hist, kValHist);

  ValPartial p;
  p.cls[kNormal] = 0;  // the host derives it from the count
  p.cls[kSubnormal] = block_reduce(t.sub, SumOp{}, s_u);
  p.cls[kZero] = block_reduce(t.zero, SumOp{}, s_u);
  p.cls[kNan] = block_reduce(t.nan, SumOp{}, s_u);
  p.cls[kPosInf] = block_reduce(t.pinf, SumOp{}, s_u);
  p.cls[kNegInf] = block_reduce(t.ninf, SumOp{}, s_u);
  p.negatives = block_reduce(t.neg, SumOp{}, s_u);
  p.sum = block_reduce(t.sum, SumOp{}, s_d);
  p.sum_sq = block_reduce(t.sum_sq, SumOp{}, s_d);
  p.min = block_reduce(t.mn, MinOp{}, s_d);
  p.max = block_reduce(t.mx, MaxOp{}, s_d);
  if (threadIdx.x == 0) partials[blockIdx.x] = p;
}

// ---- conversions ----
template <bool Bf16>
__global__ void upcast_kernel(const uint16_t* __restrict__ in, float* __restrict__ out, size_t n) {
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t groups = n / 4;
  for (size_t g = tid; g < groups; g += stride) {
    const uint2 raw = reinterpret_cast<const uint2*>(in)[g];
    auto cv = [](unsigned int h) {
      return Bf16 ? bf16_to_f32(static_cast<uint16_t>(h)) : f16_to_f32(static_cast<uint16_t>(h));
    };
    reinterpret_cast<float4*>(out)[g] =
        make_float4(cv(raw.x & 0xffffu), cv(raw.x >> 16), cv(raw.y & 0xffffu), cv(raw.y >> 16));
  }
  for (size_t i = groups * 4 + tid; i < n; i += stride)
    out[i] = Bf16 ? bf16_to_f32(in[i]) : f16_to_f32(in[i]);
}

template <bool Bf16>
__global__ void downcast_kernel(const float* __restrict__ in, uint16_t* __restrict__ out, size_t n) {
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t groups = n / 4;
  for (size_t g = tid; g < groups; g += stride) {
    const float4 v = reinterpret_cast<const float4*>(in)[g];
    auto cv = [](float f) -> unsigned int { return Bf16 ? f32_to_bf16(f) : f32_to_f16(f); };
    reinterpret_cast<uint2*>(out)[g] = make_uint2(cv(v.x) | (cv(v.y) << 16), cv(v.z) | (cv(v.w) << 16));
  }
  for (size_t i = groups * 4 + tid; i < n; i += stride)
    out[i] = Bf16 ? f32_to_bf16(in[i]) : f32_to_f16(in[i]);
}

int grid_for(size_t work_items) {
  size_t blocks = (work_items + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535) blocks = 65535;
  return static_cast<int>(blocks);
}

}  // namespace

int divergence_hist_size() {
  return kDivHist;
}
int value_hist_size() {
  return kValHist;
}

cudaError_t launch_divergence(const void* lp, int lp_kind, const float* fp32, size_t n, DivPartial* partials,
                              int blocks, unsigned long long* hist, cudaStream_t stream) {
  switch (lp_kind) {
    case 0:
      divergence_kernel<0><<<blocks, kThreads, 0, stream>>>(lp, fp32, n, partials, hist);
      break;
    case 1:
      divergence_kernel<1><<<blocks, kThreads, 0, stream>>>(lp, fp32, n, partials, hist);
      break;
    default:
      divergence_kernel<2><<<blocks, kThreads, 0, stream>>>(lp, fp32, n, partials, hist);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_values(const void* data, int kind, size_t n, ValPartial* partials, int blocks,
                          unsigned long long* hist, cudaStream_t stream) {
  switch (kind) {
    case 0:
      values_kernel<0><<<blocks, kThreads, 0, stream>>>(data, n, partials, hist);
      break;
    case 1:
      values_kernel<1><<<blocks, kThreads, 0, stream>>>(data, n, partials, hist);
      break;
    case 2:
      values_kernel<2><<<blocks, kThreads, 0, stream>>>(data, n, partials, hist);
      break;
    default:
      values_kernel<3><<<blocks, kThreads, 0, stream>>>(data, n, partials, hist);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_upcast(const uint16_t* in, bool bf16, float* out, size_t n, cudaStream_t stream) {
  const int blocks = grid_for(n / 4 + 1);
  if (bf16)
    upcast_kernel<true><<<blocks, kThreads, 0, stream>>>(in, out, n);
  else
    upcast_kernel<false><<<blocks, kThreads, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

cudaError_t launch_downcast(const float* in, bool bf16, uint16_t* out, size_t n, cudaStream_t stream) {
  const int blocks = grid_for(n / 4 + 1);
  if (bf16)
    downcast_kernel<true><<<blocks, kThreads, 0, stream>>>(in, out, n);
  else
    downcast_kernel<false><<<blocks, kThreads, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

}  // namespace ckptdoc::cuda
