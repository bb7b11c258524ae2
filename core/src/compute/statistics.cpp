#include "ckptdoc/compute/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compute/element_ops.h"

namespace ckptdoc {

// ---- LogHistogram ----
double LogHistogram::lower_edge(int i) {
  return std::ldexp(1.0 + static_cast<double>(i % 4) / 4.0, kLogMinExp + i / 4);
}
double LogHistogram::log10_lower_edge(int i) {
  return std::log10(lower_edge(i));
}

int LogHistogram::bin_of(float abs_value) {
  return compute::log_bin_from_f32_bits(compute::f32_bits(abs_value) & 0x7fffffffu);
}

void LogHistogram::add(float value) {
  const int s = compute::log_slot_f32(value);
  switch (s) {
    case compute::kSlotUnderflow:
      ++underflow;
      break;
    case compute::kSlotOverflow:
      ++overflow;
      break;
    case compute::kSlotZero:
      ++zeros;
      break;
    case compute::kSlotNonfinite:
      ++nonfinite;
      break;
    default:
      counts.add(static_cast<size_t>(s));
      break;
  }
}

void LogHistogram::merge(const LogHistogram& o) {
  counts.merge(o.counts);
  zeros += o.zeros;
  underflow += o.underflow;
  overflow += o.overflow;
  nonfinite += o.nonfinite;
}

uint64_t LogHistogram::total() const {
  uint64_t t = zeros + underflow + overflow + nonfinite;
  for (size_t i = counts.first(); i < counts.first() + counts.stored(); ++i) t += counts[i];
  return t;
}

// ---- UlpHistogram ----
int UlpHistogram::bucket_of(uint32_t distance) {
  return compute::ulp_bucket(distance);
}

std::string UlpHistogram::bucket_label(int b) {
  if (b <= 0) return "0";
  if (b == 1) return "1";
  if (b >= kBuckets - 1) return ">=" + std::to_string(1u << (kBuckets - 2));
  return std::to_string(1u << (b - 1)) + "-" + std::to_string((1u << b) - 1u);
}

void UlpHistogram::merge(const UlpHistogram& o) {
  counts.merge(o.counts);
}

// ---- ValueStats ----
double ValueStats::mean() const {
  const uint64_t n = finite_count();
  return n ? sum / static_cast<double>(n) : 0.0;
}
double ValueStats::rms() const {
  const uint64_t n = finite_count();
  return n ? std::sqrt(sum_sq / static_cast<double>(n)) : 0.0;
}

void ValueStats::merge(const ValueStats& o) {
  const bool mine = finite_count() > 0, theirs = o.finite_count() > 0;
  if (theirs) {
    min = mine ? std::min(min, o.min) : o.min;
    max = mine ? std::max(max, o.max) : o.max;
  }
  count += o.count;
  nan += o.nan;
  pos_inf += o.pos_inf;
  neg_inf += o.neg_inf;
  zeros += o.zeros;
  subnormals += o.subnormals;
  negatives += o.negatives;
  sum += o.sum;
  sum_sq += o.sum_sq;
  log_abs.merge(o.log_abs);
  log_abs_negative.merge(o.log_abs_negative);
}

// ---- DivergenceStats ----
double DivergenceStats::mean_abs() const {
  const uint64_t n = count - nonfinite;
  return n ? sum_abs / static_cast<double>(n) : 0.0;
}

double DivergenceStats::rel_l2() const {
  if (sum_sq_lp == 0.0) return sum_sq_diff == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(sum_sq_diff / sum_sq_lp);
}

double DivergenceStats::exact_fraction() const {
  return count ? static_cast<double>(exact) / static_cast<double>(count) : 0.0;
}

void DivergenceStats::merge(const DivergenceStats& o) {
  count += o.count;
  exact += o.exact;
  nonfinite += o.nonfinite;
  max_abs = std::max(max_abs, o.max_abs);
  sum_abs += o.sum_abs;
  sum_sq_diff += o.sum_sq_diff;
  sum_sq_lp += o.sum_sq_lp;
  sum_sq_fp32 += o.sum_sq_fp32;
  log_abs_diff.merge(o.log_abs_diff);
  ulp.merge(o.ulp);
}

}  // namespace ckptdoc
