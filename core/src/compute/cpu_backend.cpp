// CPU backend: fixed 1M-element chunks handed to the process's shared worker pool, per-chunk results merged
// in chunk order, so every result is the same for any thread count (sums included: chunk boundaries do not
// move). Statistics and divergence run the AVX2 kernels of cpu_simd.cpp where the processor has them (the
// scalar code below finishes each chunk's ragged tail), else the portable scalar code. Data passed as void*
// may lie at any byte offset (legacy torch files are mapped where their storages fall, most not on their
// element size), so it is read by memcpy; float* arguments are aligned (callers copy misaligned masters).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/error.h"
#include "ckptdoc/parallel.h"
#include "compute/cpu_simd.h"
#include "compute/element_ops.h"

namespace ckptdoc {
namespace {

using namespace ckptdoc::compute;

constexpr size_t kChunk = size_t{1} << 20;

// Runs fn(chunk_index, begin, end) for every chunk of [0, n) on up to `threads` threads of the process's
// shared pool (parallel.h): diagnose calls the backend once per fragment, and threads started per call would
// cost more than a small fragment's work.
template <class Fn>
void for_each_chunk(size_t n, unsigned threads, Fn&& fn) {
  const size_t chunks = (n + kChunk - 1) / kChunk;
  if (chunks <= 1 || threads <= 1) {
    for (size_t c = 0; c < chunks; ++c) fn(c, c * kChunk, std::min(n, (c + 1) * kChunk));
    return;
  }
  parallel_for(chunks, threads,
               [&](size_t c, unsigned) { fn(c, c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

using Slots = std::array<uint64_t, kLogSlots>;

void slots_into(const Slots& s, LogHistogram& h) {
  auto bins = h.counts.dense();
  for (int i = 0; i < kLogBins; ++i) bins[static_cast<size_t>(i)] += s[static_cast<size_t>(i)];
  h.counts.assign(bins);
  h.underflow += s[kSlotUnderflow];
  h.overflow += s[kSlotOverflow];
  h.zeros += s[kSlotZero];
  h.nonfinite += s[kSlotNonfinite];
}

// ---- value statistics ----
struct Loaded {
  int cls;
  double v;
  int slot;
};

template <DType T>
inline Loaded load(const void* data, size_t i) {
  if constexpr (T == DType::F16) {
    uint16_t h;
    std::memcpy(&h, static_cast<const char*>(data) + 2 * i, 2);
    const float f = f16_to_f32(h);
    return {classify_f16(h), f, log_slot_f32(f)};
  } else if constexpr (T == DType::BF16) {
    uint16_t b;
    std::memcpy(&b, static_cast<const char*>(data) + 2 * i, 2);
    const float f = bf16_to_f32(b);
    return {classify_bf16(b), f, log_slot_f32(f)};
  } else if constexpr (T == DType::F32) {
    float f;
    std::memcpy(&f, static_cast<const char*>(data) + 4 * i, 4);
    return {classify_f32(f32_bits(f)), f, log_slot_f32(f)};
  } else {
    double d;
    std::memcpy(&d, static_cast<const char*>(data) + 8 * i, 8);
    return {classify_f64(f64_bits(d)), d, log_slot_f64(d)};
  }
}

template <DType T>
ValueStats value_chunk(const void* data, size_t begin, size_t end) {
  ValueStats s;
  Slots all{}, neg{};
  uint64_t cls_count[6] = {0, 0, 0, 0, 0, 0};
  uint64_t negatives = 0;
  double sum = 0, sum_sq = 0;
  double mn = std::numeric_limits<double>::infinity(), mx = -mn;
  for (size_t i = begin; i < end; ++i) {
    const Loaded e = load<T>(data, i);
    ++cls_count[e.cls];
    ++all[static_cast<size_t>(e.slot)];
    if (e.v < 0) {
      ++negatives;
      ++neg[static_cast<size_t>(e.slot)];
    }
    if (e.cls <= kZero) {  // finite
      sum += e.v;
      sum_sq += e.v * e.v;
      mn = std::min(mn, e.v);
      mx = std::max(mx, e.v);
    }
  }
  s.count = end - begin;
  s.subnormals = cls_count[kSubnormal];
  s.zeros = cls_count[kZero];
  s.nan = cls_count[kNan];
  s.pos_inf = cls_count[kPosInf];
  s.neg_inf = cls_count[kNegInf];
  s.negatives = negatives;
  s.sum = sum;
  s.sum_sq = sum_sq;
  if (s.finite_count() > 0) {
    s.min = mn;
    s.max = mx;
  }
  slots_into(all, s.log_abs);
  slots_into(neg, s.log_abs_negative);
  return s;
}

// ---- divergence ----
struct DivAcc {
  uint64_t exact = 0, nonfinite = 0;
  double max_abs = 0, sum_abs = 0, sum_sq_diff = 0, sum_sq_lp = 0, sum_sq_fp32 = 0;
  Slots slots{};
  std::array<uint64_t, UlpHistogram::kBuckets> ulp{};

  inline void add(const DivergenceElement& e) {
    exact += e.exact ? 1u : 0u;
    ++ulp[static_cast<size_t>(e.ulp_bucket)];
    ++slots[static_cast<size_t>(e.log_slot)];
    if (!e.finite) {
      ++nonfinite;
      return;
    }
    const double d = e.abs_diff, l = e.lp, m = e.master;
    max_abs = std::max(max_abs, d);
    sum_abs += d;
    sum_sq_diff += d * d;
    sum_sq_lp += l * l;
    sum_sq_fp32 += m * m;
  }
  DivergenceStats finish(size_t n) const {
    DivergenceStats s;
    s.count = n;
    s.exact = exact;
    s.nonfinite = nonfinite;
    s.max_abs = max_abs;
    s.sum_abs = sum_abs;
    s.sum_sq_diff = sum_sq_diff;
    s.sum_sq_lp = sum_sq_lp;
    s.sum_sq_fp32 = sum_sq_fp32;
    slots_into(slots, s.log_abs_diff);
    s.ulp.counts.assign(ulp);
    return s;
  }
};

DivergenceStats divergence_chunk(const void* lp, DType t, const float* fp32, size_t begin, size_t end) {
  DivAcc acc;
  if (t == DType::F32) {
    const auto* bytes = static_cast<const unsigned char*>(lp);
    for (size_t i = begin; i < end; ++i) {
      float l;
      std::memcpy(&l, bytes + 4 * i, 4);
      acc.add(divergence_element32(l, fp32[i]));
    }
  } else {
    const bool bf = t == DType::BF16;
    const auto* bytes = static_cast<const unsigned char*>(lp);
    for (size_t i = begin; i < end; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      acc.add(bf ? divergence_element16(h, fp32[i], true) : divergence_element16(h, fp32[i], false));
    }
  }
  return acc.finish(end - begin);
}

// ---- chunk functions choosing the AVX2 kernels or the scalar code ----
template <DType T>
ValueStats value_chunk_best(bool simd, const void* data, size_t begin, size_t end) {
  if constexpr (T == DType::F16 || T == DType::BF16 || T == DType::F32) {
    if (simd) {
      ValueStats s;
      const size_t done = simd::values(data, T, begin, end, s);
      if (begin + done < end) s.merge(value_chunk<T>(data, begin + done, end));
      return s;
    }
  }
  return value_chunk<T>(data, begin, end);
}

ValueStats value_chunk_lp(bool simd, const void* data, DType t, size_t begin, size_t end) {
  switch (t) {
    case DType::F16:
      return value_chunk_best<DType::F16>(simd, data, begin, end);
    case DType::BF16:
      return value_chunk_best<DType::BF16>(simd, data, begin, end);
    default:
      return value_chunk_best<DType::F32>(simd, data, begin, end);
  }
}

DivergenceStats divergence_chunk_best(bool simd, const void* lp, DType t, const float* fp32, size_t begin,
                                      size_t end) {
  if (simd) {
    DivergenceStats s;
    const size_t done = simd::divergence(lp, t, fp32, begin, end, s, nullptr, nullptr);
    if (begin + done < end) s.merge(divergence_chunk(lp, t, fp32, begin + done, end));
    return s;
  }
  return divergence_chunk(lp, t, fp32, begin, end);
}

// The three results of one chunk, identical to the three chunk functions above: the AVX2 pass computes each
// with the same operations in the same order as when it computes it alone.
FragmentStats fragment_chunk(bool simd, const void* lp, DType t, const float* fp32, size_t begin,
                             size_t end) {
  FragmentStats s;
  size_t done = 0;
  if (simd) done = simd::divergence(lp, t, fp32, begin, end, s.divergence, &s.lp, &s.fp32);
  if (begin + done < end) {
    s.divergence.merge(divergence_chunk(lp, t, fp32, begin + done, end));
    s.lp.merge(value_chunk_lp(false, lp, t, begin + done, end));
    s.fp32.merge(value_chunk<DType::F32>(fp32, begin + done, end));
  }
  return s;
}

// ---- conversions: straight loops over 16/32-bit words that g++ -O2 can vectorise ----
inline uint16_t word(const unsigned char* in, size_t i) {
  uint16_t h;
  std::memcpy(&h, in + 2 * i, 2);
  return h;
}
void upcast_range(const unsigned char* in, DType t, float* out, size_t begin, size_t end) {
  if (t == DType::BF16) {
    for (size_t i = begin; i < end; ++i) out[i] = bf16_to_f32(word(in, i));
  } else {
    for (size_t i = begin; i < end; ++i) out[i] = f16_to_f32(word(in, i));
  }
}
void downcast_range(const float* in, DType t, uint16_t* out, size_t begin, size_t end) {
  if (t == DType::BF16) {
    for (size_t i = begin; i < end; ++i) out[i] = f32_to_bf16(in[i]);
  } else {
    for (size_t i = begin; i < end; ++i) out[i] = f32_to_f16(in[i]);
  }
}

Error unsupported(const std::string& op, DType t) {
  return Error("", op, expected_found("float16, bfloat16 or float32", std::string(dtype_name(t))));
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(unsigned threads, CpuPath path)
      : threads_(threads ? threads : default_workers()),
        simd_(path == CpuPath::Best && simd::avx2_usable()) {}

  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string description() const override {
    return "CPU (" + std::to_string(threads_) + (threads_ == 1 ? " thread" : " threads") +
           (simd_ ? ", AVX2)" : ")");
  }

  ValueStats value_stats(const void* data, DType dtype, size_t n) override {
    switch (dtype) {
      case DType::F32:
        return values<DType::F32>(data, n);
      case DType::F16:
        return values<DType::F16>(data, n);
      case DType::BF16:
        return values<DType::BF16>(data, n);
      case DType::F64:
        return values<DType::F64>(data, n);
      default:
        throw Error(ErrorKind::Unsupported, "", "value statistics",
                    expected_found("float32, float16, bfloat16 or float64", std::string(dtype_name(dtype))));
    }
  }

  DivergenceStats divergence(const void* lp, DType lp_dtype, const float* fp32, size_t n) override {
    if (lp_dtype != DType::F16 && lp_dtype != DType::BF16 && lp_dtype != DType::F32)
      throw unsupported("divergence", lp_dtype);
    if (n > 0 && n <= kChunk) return divergence_chunk_best(simd_, lp, lp_dtype, fp32, 0, n);  // one chunk
    std::vector<DivergenceStats> parts((n + kChunk - 1) / kChunk);
    for_each_chunk(n, threads_, [&](size_t c, size_t b, size_t e) {
      parts[c] = divergence_chunk_best(simd_, lp, lp_dtype, fp32, b, e);
    });
    DivergenceStats total;
    for (const auto& p : parts) total.merge(p);
    return total;
  }

  FragmentStats fragment_stats(const void* lp, DType lp_dtype, const float* fp32, size_t n) override {
    if (lp_dtype != DType::F16 && lp_dtype != DType::BF16 && lp_dtype != DType::F32)
      throw unsupported("divergence", lp_dtype);
    if (n > 0 && n <= kChunk) return fragment_chunk(simd_, lp, lp_dtype, fp32, 0, n);
    std::vector<FragmentStats> parts((n + kChunk - 1) / kChunk);
    for_each_chunk(n, threads_, [&](size_t c, size_t b, size_t e) {
      parts[c] = fragment_chunk(simd_, lp, lp_dtype, fp32, b, e);
    });
    FragmentStats total;
    for (const auto& p : parts) {
      total.divergence.merge(p.divergence);
      total.lp.merge(p.lp);
      total.fp32.merge(p.fp32);
    }
    return total;
  }

  void upcast(const void* lp, DType lp_dtype, float* out, size_t n) override {
    if (lp_dtype == DType::F32) {
      copy(lp, out, n * 4);
      return;
    }
    if (lp_dtype != DType::F16 && lp_dtype != DType::BF16) throw unsupported("upcast", lp_dtype);
    const auto* in = static_cast<const unsigned char*>(lp);
    for_each_chunk(n, threads_, [&](size_t, size_t b, size_t e) { upcast_range(in, lp_dtype, out, b, e); });
  }

  void downcast(const float* in, DType lp_dtype, void* out, size_t n) override {
    if (lp_dtype == DType::F32) {
      copy(in, out, n * 4);
      return;
    }
    if (lp_dtype != DType::F16 && lp_dtype != DType::BF16) throw unsupported("downcast", lp_dtype);
    auto* o = static_cast<uint16_t*>(out);
    for_each_chunk(n, threads_, [&](size_t, size_t b, size_t e) { downcast_range(in, lp_dtype, o, b, e); });
  }

 private:
  template <DType T>
  ValueStats values(const void* data, size_t n) {
    // One chunk (every fragment of a small param): its result as it is, without a vector of parts and a
    // merge into an empty total (the same numbers: merging into empty statistics adds to zeros).
    if (n > 0 && n <= kChunk) return value_chunk_best<T>(simd_, data, 0, n);
    std::vector<ValueStats> parts((n + kChunk - 1) / kChunk);
    for_each_chunk(n, threads_,
                   [&](size_t c, size_t b, size_t e) { parts[c] = value_chunk_best<T>(simd_, data, b, e); });
    ValueStats total;
    for (const auto& p : parts) total.merge(p);
    return total;
  }
  void copy(const void* in, void* out, size_t bytes) {
    if (in != out) std::memmove(out, in, bytes);
  }

  unsigned threads_;
  bool simd_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(unsigned threads, CpuPath path) {
  return std::make_unique<CpuBackend>(threads, path);
}

bool cpu_simd_available() {
  return compute::simd::avx2_usable();
}

}  // namespace ckptdoc
