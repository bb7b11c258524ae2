#pragma once
// Mergeable statistics and histograms computed by the compute backends. Bin indices are computed from IEEE
// bits with integer operations only, so CPU and CUDA give identical counts; sums are accumulated in double
// and agree within floating-point tolerance.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ckptdoc {

// Log-magnitude histogram: 4 bins per power of two, from 2^kLogMinExp up to 2^kLogMaxExp. Bin i covers
// [2^(kLogMinExp + i/4) rounded to the top two mantissa bits, ...). Values below the range (but non-zero)
// count in `underflow`, above in `overflow`, exact zeros in `zeros`, NaN/Inf in `nonfinite`.
struct LogHistogram {
  static constexpr int kLogMinExp = -40;  // 2^-40 ~ 9.1e-13
  static constexpr int kLogMaxExp = 24;   // 2^24 ~ 1.7e7
  static constexpr int kBins = (kLogMaxExp - kLogMinExp) * 4;
  std::array<uint64_t, kBins> counts{};
  uint64_t zeros = 0, underflow = 0, overflow = 0, nonfinite = 0;

  // Lower edge of bin i as a value (2^e * (1 + m/4)).
  static double lower_edge(int i);
  static double log10_lower_edge(int i);
  // The bin of a finite non-zero |x| (float bits), or -1 below, kBins above the range.
  static int bin_of(float abs_value);
  void add(float value);
  void merge(const LogHistogram& o);
  uint64_t total() const;
};

// Distance in units in the last place of the lp dtype between the stored lp value and round_to_lp(fp32):
// bucket 0 = equal, bucket k (1..16) = distance in [2^(k-1), 2^k), bucket 17 = 65536 or more (or NaN
// mismatch).
struct UlpHistogram {
  static constexpr int kBuckets = 18;
  std::array<uint64_t, kBuckets> counts{};
  static int bucket_of(uint32_t distance);
  static std::string bucket_label(int b);
  void merge(const UlpHistogram& o);
};

// Statistics of one tensor (or one partition) of values.
struct ValueStats {
  uint64_t count = 0;
  uint64_t nan = 0, pos_inf = 0, neg_inf = 0, zeros = 0, subnormals = 0, negatives = 0;
  double min = 0, max = 0;  // over finite values; meaningless when finite_count() == 0
  double sum = 0, sum_sq = 0;
  LogHistogram log_abs;          // log|v| histogram (moments use it on a log axis)
  LogHistogram log_abs_negative; // log|v| of negative values only: with log_abs gives a signed view

  uint64_t finite_count() const { return count - nan - pos_inf - neg_inf; }
  double mean() const;
  double rms() const;
  void merge(const ValueStats& o);
};

// lp (fp16/bf16) weights compared with their fp32 masters.
struct DivergenceStats {
  uint64_t count = 0;
  uint64_t exact = 0;          // lp == round_to_lp(fp32), bit for bit
  uint64_t nonfinite = 0;      // either side NaN/Inf (excluded from the sums)
  double max_abs = 0;          // max |fp32 - upcast(lp)|
  double sum_abs = 0;          // sum |fp32 - upcast(lp)|
  double sum_sq_diff = 0;      // sum (fp32 - upcast(lp))^2
  double sum_sq_lp = 0;        // sum upcast(lp)^2
  double sum_sq_fp32 = 0;      // sum fp32^2
  LogHistogram log_abs_diff;   // |fp32 - upcast(lp)|
  UlpHistogram ulp;

  double mean_abs() const;
  double rel_l2() const;        // ||fp32 - lp|| / ||lp||
  double exact_fraction() const;
  void merge(const DivergenceStats& o);
};

}  // namespace ckptdoc
