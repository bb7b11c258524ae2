#pragma once
// Comparison of compute results, Qt-free: each diff_* returns an empty string when the two results agree
// (counts exact, sums within a relative tolerance) and otherwise says what differs first. Used by the Qt Test
// suites through compute_compare.h and by the plain gpu_check executable.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "ckptdoc/compute/statistics.h"

namespace ckptdoc::test {

inline bool close_rel(double a, double b, double rel) {
  if (a == b) return true;
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

inline std::string diff_u64(const char* what, uint64_t a, uint64_t b) {
  if (a == b) return {};
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %llu vs %llu", what, static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

inline std::string diff_f64(const char* what, double a, double b, double rel) {
  if (close_rel(a, b, rel)) return {};
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %.17g vs %.17g", what, a, b);
  return buf;
}

inline std::string diff_log(const LogHistogram& a, const LogHistogram& b) {
  for (auto d :
       {diff_u64("zeros", a.zeros, b.zeros), diff_u64("underflow", a.underflow, b.underflow),
        diff_u64("overflow", a.overflow, b.overflow), diff_u64("nonfinite", a.nonfinite, b.nonfinite)})
    if (!d.empty()) return d;
  for (size_t i = 0; i < a.counts.size(); ++i)
    if (a.counts[i] != b.counts[i])
      return diff_u64(("bin " + std::to_string(i) + ":").c_str(), a.counts[i], b.counts[i]);
  return {};
}

// Empty when equal (counts exact, sums within rel).
inline std::string diff_values(const ValueStats& a, const ValueStats& b, double rel) {
  for (auto d : {diff_u64("count", a.count, b.count), diff_u64("nan", a.nan, b.nan),
                 diff_u64("pos_inf", a.pos_inf, b.pos_inf), diff_u64("neg_inf", a.neg_inf, b.neg_inf),
                 diff_u64("zeros", a.zeros, b.zeros), diff_u64("subnormals", a.subnormals, b.subnormals),
                 diff_u64("negatives", a.negatives, b.negatives), diff_f64("min", a.min, b.min, rel),
                 diff_f64("max", a.max, b.max, rel), diff_f64("sum", a.sum, b.sum, rel),
                 diff_f64("sum_sq", a.sum_sq, b.sum_sq, rel)})
    if (!d.empty()) return d;
  if (auto d = diff_log(a.log_abs, b.log_abs); !d.empty()) return "log_abs " + d;
  if (auto d = diff_log(a.log_abs_negative, b.log_abs_negative); !d.empty()) return "log_abs_negative " + d;
  return {};
}

inline std::string diff_divergence(const DivergenceStats& a, const DivergenceStats& b, double rel) {
  for (auto d :
       {diff_u64("count", a.count, b.count), diff_u64("exact", a.exact, b.exact),
        diff_u64("nonfinite", a.nonfinite, b.nonfinite), diff_f64("max_abs", a.max_abs, b.max_abs, rel),
        diff_f64("sum_abs", a.sum_abs, b.sum_abs, rel),
        diff_f64("sum_sq_diff", a.sum_sq_diff, b.sum_sq_diff, rel),
        diff_f64("sum_sq_lp", a.sum_sq_lp, b.sum_sq_lp, rel),
        diff_f64("sum_sq_fp32", a.sum_sq_fp32, b.sum_sq_fp32, rel)})
    if (!d.empty()) return d;
  for (size_t i = 0; i < a.ulp.counts.size(); ++i)
    if (a.ulp.counts[i] != b.ulp.counts[i])
      return diff_u64(("ulp bucket " + std::to_string(i) + ":").c_str(), a.ulp.counts[i], b.ulp.counts[i]);
  if (auto d = diff_log(a.log_abs_diff, b.log_abs_diff); !d.empty()) return "log_abs_diff " + d;
  return {};
}

// Byte-for-byte equality of two arrays of n elements of `elem` bytes: the first differing element otherwise.
inline std::string diff_bits(const void* a, const void* b, size_t n, size_t elem) {
  if (n == 0 || std::memcmp(a, b, n * elem) == 0) return {};
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  size_t i = 0, bad = 0;
  for (size_t k = 0; k < n; ++k)
    if (std::memcmp(pa + k * elem, pb + k * elem, elem) != 0) {
      if (bad++ == 0) i = k;
    }
  unsigned long long x = 0, y = 0;
  std::memcpy(&x, pa + i * elem, std::min(elem, sizeof x));
  std::memcpy(&y, pb + i * elem, std::min(elem, sizeof y));
  char buf[200];
  std::snprintf(buf, sizeof buf, "%zu of %zu elements differ; first at %zu: 0x%0*llx vs 0x%0*llx", bad, n, i,
                static_cast<int>(2 * elem), x, static_cast<int>(2 * elem), y);
  return buf;
}

}  // namespace ckptdoc::test
