#pragma once
// Test data and a deliberately plain reference for the compute backends: element by element, with
// std::frexp/std::fpclassify and dtype.h's conversions instead of the backends' shared bit tricks.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ckptdoc/compute/statistics.h"
#include "ckptdoc/dtype.h"

namespace ckptdoc::test {

// Log-histogram bin of a finite non-zero magnitude via frexp: -1 below, kBins above.
inline int ref_log_bin(double a) {
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int exp2 = e - 1;
  if (exp2 < LogHistogram::kLogMinExp) return -1;
  if (exp2 >= LogHistogram::kLogMaxExp) return LogHistogram::kBins;
  const int quarter = static_cast<int>(std::floor((2.0 * m - 1.0) * 4.0));
  return (exp2 - LogHistogram::kLogMinExp) * 4 + quarter;
}

inline void ref_log_add(LogHistogram& h, double v) {
  if (std::isnan(v) || std::isinf(v)) {
    ++h.nonfinite;
  } else if (v == 0) {
    ++h.zeros;
  } else {
    const int b = ref_log_bin(std::fabs(v));
    if (b < 0)
      ++h.underflow;
    else if (b >= LogHistogram::kBins)
      ++h.overflow;
    else
      h.counts.add(static_cast<size_t>(b));
  }
}

// Subnormal in the element's own format.
inline bool ref_is_subnormal(DType t, double v) {
  if (v == 0 || !std::isfinite(v)) return false;
  const double a = std::fabs(v);
  switch (t) {
    case DType::F16:
      return a < std::ldexp(1.0, -14);
    case DType::BF16:
    case DType::F32:
      return a < std::ldexp(1.0, -126);
    default:
      return a < std::numeric_limits<double>::min();
  }
}

inline double ref_load(const void* data, DType t, size_t i) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint16_t h;
  float f;
  double d;
  switch (t) {
    case DType::F16:
      std::memcpy(&h, p + 2 * i, 2);
      return half_to_float(h);
    case DType::BF16:
      std::memcpy(&h, p + 2 * i, 2);
      return bf16_to_float(h);
    case DType::F32:
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    default:
      std::memcpy(&d, p + 8 * i, 8);
      return d;
  }
}

inline ValueStats ref_value_stats(const void* data, DType t, size_t n) {
  ValueStats s;
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    const double v = ref_load(data, t, i);
    ++s.count;
    if (t == DType::F64)
      ref_log_add(s.log_abs, v);
    else
      ref_log_add(s.log_abs, static_cast<float>(v));
    if (v < 0) {
      ++s.negatives;
      ref_log_add(s.log_abs_negative, v);
    }
    if (std::isnan(v)) {
      ++s.nan;
      continue;
    }
    if (std::isinf(v)) {
      ++(v > 0 ? s.pos_inf : s.neg_inf);
      continue;
    }
    if (v == 0) ++s.zeros;
    if (ref_is_subnormal(t, v)) ++s.subnormals;
    s.sum += v;
    s.sum_sq += v * v;
    s.min = any ? std::min(s.min, v) : v;
    s.max = any ? std::max(s.max, v) : v;
    any = true;
  }
  return s;
}

// Signed position of a 16-bit pattern on the number line (+0 and -0 both 0).
inline long ref_pos16(uint16_t h) {
  return (h & 0x8000) ? -static_cast<long>(h & 0x7fff) : static_cast<long>(h);
}
inline long long ref_pos32(uint32_t x) {
  return (x & 0x80000000u) ? -static_cast<long long>(x & 0x7fffffffu) : static_cast<long long>(x);
}
inline int ref_bucket(unsigned long long d) {
  if (d == 0) return 0;
  if (d >= 65536) return UlpHistogram::kBuckets - 1;
  int k = 1;
  while ((1ull << k) <= d) ++k;  // d in [2^(k-1), 2^k)
  return k;
}

inline DivergenceStats ref_divergence(const void* lp, DType t, const float* fp32, size_t n) {
  DivergenceStats s;
  for (size_t i = 0; i < n; ++i) {
    ++s.count;
    const float m = fp32[i];
    float l;
    int bucket;
    bool exact;
    if (t == DType::F32) {
      std::memcpy(&l, static_cast<const char*>(lp) + 4 * i, 4);
      uint32_t lb, mb;
      std::memcpy(&lb, &l, 4);
      std::memcpy(&mb, &m, 4);
      exact = lb == mb;
      if (std::isnan(l) || std::isnan(m))
        bucket = (std::isnan(l) && std::isnan(m)) ? 0 : UlpHistogram::kBuckets - 1;
      else
        bucket = ref_bucket(static_cast<unsigned long long>(std::llabs(ref_pos32(lb) - ref_pos32(mb))));
    } else {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(lp) + 2 * i, 2);
      const uint16_t r = t == DType::BF16 ? float_to_bf16(m) : float_to_half(m);
      l = t == DType::BF16 ? bf16_to_float(h) : half_to_float(h);
      exact = h == r;
      if (std::isnan(l) || std::isnan(m))
        bucket = (std::isnan(l) && std::isnan(m)) ? 0 : UlpHistogram::kBuckets - 1;
      else
        bucket = ref_bucket(static_cast<unsigned long long>(std::labs(ref_pos16(h) - ref_pos16(r))));
    }
    s.exact += exact ? 1 : 0;
    s.ulp.counts.add(static_cast<size_t>(bucket));
    if (!std::isfinite(l) || !std::isfinite(m)) {
      ++s.nonfinite;
      ++s.log_abs_diff.nonfinite;
      continue;
    }
    const float d = std::fabs(m - l);
    ref_log_add(s.log_abs_diff, d);
    s.max_abs = std::max(s.max_abs, static_cast<double>(d));
    s.sum_abs += d;
    s.sum_sq_diff += static_cast<double>(d) * d;
    s.sum_sq_lp += static_cast<double>(l) * l;
    s.sum_sq_fp32 += static_cast<double>(m) * m;
  }
  return s;
}

// fp32 masters ~ N(0, scale) with zeros, subnormals (fp32 and lp), huge values, NaN and +-Inf injected.
inline std::vector<float> make_masters(size_t n, uint32_t seed, float scale = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::uniform_int_distribution<int> pick(0, 999);
  std::vector<float> v(n);
  for (auto& x : v) {
    const int p = pick(rng);
    if (p == 0)
      x = std::numeric_limits<float>::quiet_NaN();
    else if (p == 1)
      x = std::numeric_limits<float>::infinity();
    else if (p == 2)
      x = -std::numeric_limits<float>::infinity();
    else if (p < 10)
      x = 0.0f;
    else if (p < 15)
      x = -0.0f;
    else if (p < 20)
      x = normal(rng) * 1e-36f;  // fp32 subnormal range
    else if (p < 30)
      x = normal(rng) * 1e-4f;  // fp16 subnormal range
    else if (p < 35)
      x = normal(rng) * 1e7f;  // past fp16 max, past the log range
    else
      x = normal(rng);
  }
  return v;
}

// lp copies: mostly round(master), some nudged by a few ULPs, some replaced outright (NaN/Inf/zero).
inline std::vector<uint16_t> make_lp(const std::vector<float>& m, DType t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 999);
  std::uniform_int_distribution<int> nudge(-40, 40);
  std::vector<uint16_t> lp(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    uint16_t h = t == DType::BF16 ? float_to_bf16(m[i]) : float_to_half(m[i]);
    const int p = pick(rng);
    if (p < 150)
      h = static_cast<uint16_t>(h + nudge(rng));
    else if (p < 152)
      h = t == DType::BF16 ? 0x7fc0 : 0x7e00;  // NaN
    else if (p < 154)
      h = t == DType::BF16 ? 0xff80 : 0xfc00;  // -Inf
    else if (p < 160)
      h = 0;
    else if (p < 162)
      h = static_cast<uint16_t>(rng());  // anything
    lp[i] = h;
  }
  return lp;
}

}  // namespace ckptdoc::test
