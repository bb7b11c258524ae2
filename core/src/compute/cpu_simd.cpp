// AVX2 + F16C + FMA kernels of the CPU backend (see cpu_simd.h). Only the functions marked CKPTDOC_AVX2
// use those instructions; the rest of this file, and everything it includes, is compiled for the baseline
// target, so no AVX2 code can leak into inline functions shared with other files.
//
// Layout of one 8-element step: classify and bin with vector integer operations on the IEEE bits, widen to
// double for the sums (exact products, so FMA gives the same result as multiply-then-add), and write each
// element's histogram index into a small buffer. Every 64 elements the buffers are counted into several
// interleaved sub-histograms, so runs of equal indices do not serialise on one counter. The index is a
// float's top bits as they are (one shift), the finish maps those raw bins onto the log slots.
//
// The histograms (32 KB per value accumulator, 16 KB for the divergence) live in per-thread accumulators that
// stay zeroed between calls: each pass tracks the range of raw bins it touched (vector min/max of the
// non-zero magnitudes), and the finish sums and clears only that range and the zeros' bin group. Zeroing and
// summing whole histograms cost ~100x the elements of a 1k-element param (a checkpoint of 20k small params
// spent most of its scan there).
#include "compute/cpu_simd.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "compute/element_ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CKPTDOC_SIMD_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ckptdoc::compute::simd {

#if defined(CKPTDOC_SIMD_X86)

namespace {

#define CKPTDOC_AVX2 __attribute__((target("avx2,f16c,fma")))
#define CKPTDOC_AVX2_INLINE __attribute__((target("avx2,f16c,fma"), always_inline)) inline

constexpr int kBlock = 64;  // elements between histogram flushes
constexpr int kSubLog = 4;  // interleaved copies of the log / value histograms (div_count assumes 4)
constexpr int kUlpPad = 32;
// Value histogram index: the log slot, kLogSlots + slot for a negative value, kValNan for NaN. The class
// counts other than subnormals fall out of it: zeros, +Inf (non-finite, not negative, not NaN), -Inf
// (non-finite and negative), NaN, negatives.
constexpr int kValNan = 2 * kLogSlots;
constexpr int kValSlots = 2 * kLogSlots + 8;
static_assert(kLogBins == 256 && kSlotNonfinite == kLogBins + 3, "slot layout assumed below");
// Raw histogram index: a float's top 11 bits (sign, exponent, the top two mantissa bits) or, for a
// magnitude, its top 10. The log slot is a function of those bits (log_slot_of_raw) except that a zero
// shares its raw bin with the tiny subnormals, and Inf its raw bin with some NaNs: vector counters of zeros
// and infinities tell them apart at the finish. One shift per element instead of the compares and blends of a
// slot.
constexpr int kRawShift = 21;
constexpr int kRawMagnitudes = 1024;
constexpr int kRawBins = 2 * kRawMagnitudes;
constexpr int kRawNonfinite = 0x7f800000 >> kRawShift;  // raw magnitudes from here on: exponent all ones
constexpr int kRawBinBase = (127 + LogHistogram::kLogMinExp) * 4;

// The log slot of a raw magnitude that is neither zero nor non-finite.
int log_slot_of_raw(int raw) {
  const int b = raw - kRawBinBase;
  return b < 0 ? kSlotUnderflow : (b >= kLogBins ? kSlotOverflow : b);
}

enum Kind : int { kF16 = 0, kBF16 = 1, kF32 = 2 };

CKPTDOC_AVX2_INLINE __m256i splat(int x) {
  return _mm256_set1_epi32(x);
}

// ULP bucket of distances d in [0, 65536]: 0 for 0, else floor(log2 d) + 1, read off the exponent of float(d)
// (exact: d < 2^24).
CKPTDOC_AVX2_INLINE __m256i ulp_bucket8(__m256i d) {
  const __m256i e = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(d)), 23);
  return _mm256_max_epi32(_mm256_sub_epi32(e, splat(126)), _mm256_setzero_si256());
}

// ordered16 of 16-bit patterns held in 32-bit lanes: -(h & 0x7fff) when the sign bit is set.
CKPTDOC_AVX2_INLINE __m256i ordered16_8(__m256i h) {
  const __m256i neg = _mm256_cmpgt_epi32(h, splat(0x7fff));
  return _mm256_sub_epi32(_mm256_xor_si256(_mm256_and_si256(h, splat(0x7fff)), neg), neg);
}

// ---- value statistics ----
struct ValAcc {
  __m256i sub;  // lane counts of half subnormals, as sums of -1 masks (a float's come from its raw bins)
  __m256i zero, zero_neg, inf_pos, inf_neg;  // zeros (and of them -0.0), +Inf, -Inf, the same way
  __m256d sum[2], sq[2];
  __m256 mn, mx;
  __m256i lo, hi;  // lane min/max of the raw magnitudes of non-zero values (the bins touched besides group 0)
  int first_zero;  // sign bit of the first zero value, -1 before one
  alignas(64) uint32_t hist[kSubLog][kRawBins];  // all zero between calls (val_finish clears what it used)
};

CKPTDOC_AVX2_INLINE void val_init(ValAcc& a) {
  a.sub = a.zero = a.zero_neg = a.inf_pos = a.inf_neg = _mm256_setzero_si256();
  a.sum[0] = a.sum[1] = a.sq[0] = a.sq[1] = _mm256_setzero_pd();
  a.mn = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  a.mx = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  a.lo = splat(kRawMagnitudes - 1);
  a.hi = _mm256_setzero_si256();
  a.first_zero = -1;
}

// The touched raw-magnitude range as whole groups of 8 bins, [first, end), group 0 (zeros, the smallest
// subnormals) left out: the finish always visits it. first >= end when nothing else was touched.
struct BinRange {
  int first = 8, end = 8;
};

CKPTDOC_AVX2_INLINE BinRange bin_range(__m256i lo, __m256i hi) {
  alignas(32) uint32_t l[8], h[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), lo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(h), hi);
  uint32_t a = l[0], b = h[0];
  for (int i = 1; i < 8; ++i) {
    a = std::min(a, l[i]);
    b = std::max(b, h[i]);
  }
  BinRange r;
  if (a > b) return r;  // only zeros (or nothing)
  r.first = std::max(8, static_cast<int>(a) / 8 * 8);
  r.end = std::max(r.first, (static_cast<int>(b) / 8 + 1) * 8);
  return r;
}

// The first bin of the group after group i: group 0, then the range (for loops; no lambdas here, which would
// be compiled without the AVX2 target).
inline int next_group(const BinRange& r, int i) {
  return i == 0 ? r.first : i + 8;
}

// v: the 8 values as floats; bits: what classifies them, the half patterns (Half) or the float bits (F32,
// and BF16, whose float bits are its own bits shifted up). Writes the 8 raw histogram indices (from the float
// bits: a half's float has its class and its bin) to idx.
template <bool Half>
CKPTDOC_AVX2_INLINE void val_add(ValAcc& a, __m256 v, __m256i bits, uint32_t* idx) {
  const __m256i abs_mask = splat(Half ? 0x7fff : 0x7fffffff);
  const __m256i inf = splat(Half ? 0x7c00 : 0x7f800000);
  const __m256i min_normal = splat(Half ? 0x0400 : 0x00800000);
  const __m256i ab = _mm256_and_si256(bits, abs_mask);
  const __m256i nonfinite = _mm256_cmpgt_epi32(ab, _mm256_sub_epi32(inf, splat(1)));
  const __m256i zero = _mm256_cmpeq_epi32(ab, _mm256_setzero_si256());
  if constexpr (Half)
    a.sub = _mm256_add_epi32(a.sub, _mm256_andnot_si256(zero, _mm256_cmpgt_epi32(min_normal, ab)));
  const __m256i fb = _mm256_castps_si256(v);
  const __m256i raw = _mm256_srli_epi32(fb, kRawShift);
  const __m256i mag = _mm256_and_si256(raw, splat(kRawMagnitudes - 1));
  a.lo = _mm256_min_epu32(a.lo, _mm256_or_si256(mag, zero));  // a zero lane (all ones) never lowers it
  a.hi = _mm256_max_epu32(a.hi, _mm256_andnot_si256(zero, mag));
  a.zero = _mm256_add_epi32(a.zero, zero);
  a.zero_neg = _mm256_add_epi32(a.zero_neg, _mm256_cmpeq_epi32(fb, splat(static_cast<int>(0x80000000u))));
  a.inf_pos = _mm256_add_epi32(a.inf_pos, _mm256_cmpeq_epi32(fb, splat(0x7f800000)));
  a.inf_neg = _mm256_add_epi32(a.inf_neg, _mm256_cmpeq_epi32(fb, splat(static_cast<int>(0xff800000u))));

  const __m256 nf = _mm256_castsi256_ps(nonfinite);
  const __m256 fin = _mm256_andnot_ps(nf, v);  // non-finite lanes add +0, which leaves a lane sum unchanged
  const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(fin));
  const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(fin, 1));
  a.sum[0] = _mm256_add_pd(a.sum[0], lo);
  a.sum[1] = _mm256_add_pd(a.sum[1], hi);
  a.sq[0] = _mm256_fmadd_pd(lo, lo, a.sq[0]);
  a.sq[1] = _mm256_fmadd_pd(hi, hi, a.sq[1]);
  // Non-finite lanes become NaN (all bits set), which min/max pass over: with a NaN first operand they
  // return the second. min(v, acc) keeps acc on a tie, like std::min(acc, v): per lane the first
  // occurrence wins.
  const __m256 x = _mm256_or_ps(v, nf);
  a.mn = _mm256_min_ps(x, a.mn);
  a.mx = _mm256_max_ps(x, a.mx);
  if (a.first_zero < 0) {
    const int zm = _mm256_movemask_ps(_mm256_castsi256_ps(zero));
    if (zm != 0) a.first_zero = (_mm256_movemask_ps(v) >> __builtin_ctz(zm)) & 1;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx), raw);
}

CKPTDOC_AVX2_INLINE void val_count(ValAcc& a, const uint32_t* idx, int n) {
  for (int j = 0; j < n; j += kSubLog) {
    ++a.hist[0][idx[j]];
    ++a.hist[1][idx[j + 1]];
    ++a.hist[2][idx[j + 2]];
    ++a.hist[3][idx[j + 3]];
  }
}

// When one pass gives both sides' value statistics, the lp histogram is the fp32 one corrected where the two
// disagree: an lp weight rounded from its master falls in the master's bin but for the rare lanes where
// rounding crosses a bin edge (and wherever the two really differ), so counting only those lanes saves a
// quarter of the histogram increments of a scan (each increment costs more than the vector work of its
// element). hist[0] gets +1 at the lp index and hist[1] +1 at the fp32 index of every such lane;
// val_rebase then adds the fp32 counts. idx and base are 32-byte aligned; n is a multiple of 8.
CKPTDOC_AVX2_INLINE void val_count_delta(ValAcc& a, const uint32_t* idx, const uint32_t* base, int n) {
  for (int j = 0; j < n; j += 8) {
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx + j));
    const __m256i y = _mm256_load_si256(reinterpret_cast<const __m256i*>(base + j));
    unsigned m =
        ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, y)))) & 0xffu;
    for (; m != 0; m &= m - 1) {
      const int b = __builtin_ctz(m);
      ++a.hist[0][idx[j + b]];
      ++a.hist[1][base[j + b]];
    }
  }
}

// The lp counts from val_count_delta's corrections and the fp32 counts (exact in 32-bit wrapping arithmetic:
// every true count lies in [0, n]), over the bins either side touched, which become a's range.
CKPTDOC_AVX2_INLINE void val_rebase(ValAcc& a, const ValAcc& base) {
  a.lo = _mm256_min_epu32(a.lo, base.lo);
  a.hi = _mm256_max_epu32(a.hi, base.hi);
  const BinRange range = bin_range(a.lo, a.hi);
  for (int g = 0; g < range.end; g = next_group(range, g)) {
    for (const int i : {g, kRawMagnitudes + g}) {
      __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(&base.hist[0][i]));
      for (int k = 1; k < kSubLog; ++k)
        c = _mm256_add_epi32(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(&base.hist[k][i])));
      auto* lp0 = reinterpret_cast<__m256i*>(&a.hist[0][i]);
      auto* lp1 = reinterpret_cast<__m256i*>(&a.hist[1][i]);
      _mm256_store_si256(
          lp0, _mm256_sub_epi32(_mm256_add_epi32(c, _mm256_load_si256(lp0)), _mm256_load_si256(lp1)));
      _mm256_store_si256(lp1, _mm256_setzero_si256());
    }
  }
}

// The kSubLog sub-histograms' bins [i, i + 8) summed (exact: a count never reaches 2^32) into total, and
// cleared for the next call; returns whether the group is empty (most are, even in the touched range: a
// tensor's values fill a few binades), so the finish maps only the bins that hold something.
template <int Bins>
CKPTDOC_AVX2_INLINE bool take_group(uint32_t (&h)[kSubLog][Bins], int i, uint32_t* total) {
  __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(&h[0][i]));
  _mm256_store_si256(reinterpret_cast<__m256i*>(&h[0][i]), _mm256_setzero_si256());
  for (int k = 1; k < kSubLog; ++k) {
    auto* p = reinterpret_cast<__m256i*>(&h[k][i]);
    c = _mm256_add_epi32(c, _mm256_load_si256(p));
    _mm256_store_si256(p, _mm256_setzero_si256());
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(total), c);
  return _mm256_testz_si256(c, c) != 0;
}

CKPTDOC_AVX2_INLINE uint64_t lane_total(__m256i c) {
  alignas(32) int32_t l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), c);
  uint64_t t = 0;
  for (int32_t x : l) t += static_cast<uint64_t>(-static_cast<int64_t>(x));
  return t;
}

// Fixed-order reduction of 8 double lanes (two vectors of 4).
CKPTDOC_AVX2_INLINE double lane_sum(const __m256d* s) {
  alignas(32) double l[4];
  _mm256_store_pd(l, _mm256_add_pd(s[0], s[1]));
  return (l[0] + l[1]) + (l[2] + l[3]);
}

// Half: the values were halves (their subnormals are counted apart; a float subnormal is a non-zero value
// in a raw bin of exponent 0).
template <bool Half>
CKPTDOC_AVX2_INLINE void val_finish(ValAcc& a, size_t n, ValueStats& s) {
  s = ValueStats{};
  // The value slots (see kValNan) from the raw bins: a zero is never negative (-0 < 0 is false), so -0.0
  // leaves the negative raw bin 0 for the zero slot, and NaN is what the exponent-all-ones bins hold beyond
  // the infinities.
  std::array<uint64_t, kValSlots> h{};
  const uint64_t zeros = lane_total(a.zero), zeros_neg = lane_total(a.zero_neg);
  const uint64_t inf_pos = lane_total(a.inf_pos), inf_neg = lane_total(a.inf_neg);
  uint64_t exponent_all_ones = 0, exponent_zero = 0;
  const BinRange range = bin_range(a.lo, a.hi);
  for (int g = 0; g < range.end; g = next_group(range, g)) {
    for (const int first : {g, kRawMagnitudes + g}) {
      alignas(32) uint32_t total[8];
      if (take_group(a.hist, first, total)) continue;
      for (int r = first; r < first + 8; ++r) {
        const uint64_t c = total[r - first];
        const int mag = r % kRawMagnitudes;
        if (mag < (1 << (23 - kRawShift))) exponent_zero += c;
        if (mag >= kRawNonfinite)
          exponent_all_ones += c;
        else
          h[static_cast<size_t>(log_slot_of_raw(mag)) + (r >= kRawMagnitudes ? size_t{kLogSlots} : 0)] += c;
      }
    }
  }
  h[kSlotUnderflow] -= zeros - zeros_neg;  // raw bin 0 held +0.0 too
  h[kLogSlots + kSlotUnderflow] -= zeros_neg;
  h[kSlotZero] = zeros;
  h[kSlotNonfinite] = inf_pos;
  h[kLogSlots + kSlotNonfinite] = inf_neg;
  h[kValNan] = exponent_all_ones - inf_pos - inf_neg;
  s.count = n;
  s.nan = h[kValNan];
  s.pos_inf = h[kSlotNonfinite];
  s.neg_inf = h[kLogSlots + kSlotNonfinite];
  s.zeros = h[kSlotZero] + h[kLogSlots + kSlotZero];  // (a zero is never negative: -0 < 0 is false)
  s.subnormals = Half ? lane_total(a.sub) : exponent_zero - zeros;
  for (int i = 0; i < kLogSlots; ++i)
    s.negatives += h[static_cast<size_t>(kLogSlots) + static_cast<size_t>(i)];
  s.sum = lane_sum(a.sum);
  s.sum_sq = lane_sum(a.sq);
  if (s.finite_count() > 0) {
    alignas(32) float mn[8], mx[8];
    _mm256_store_ps(mn, a.mn);
    _mm256_store_ps(mx, a.mx);
    float lo = mn[0], hi = mx[0];
    for (int i = 1; i < 8; ++i) {
      lo = std::min(lo, mn[i]);
      hi = std::max(hi, mx[i]);
    }
    // Equal values have equal bits except for zeros: a zero extreme is the sequential scan's first zero.
    const float first_zero = a.first_zero == 1 ? -0.0f : 0.0f;
    s.min = lo == 0.0f ? first_zero : lo;
    s.max = hi == 0.0f ? first_zero : hi;
  }
  std::array<uint64_t, kLogBins> all_bins{}, neg_bins{};
  for (int i = 0; i < kLogSlots; ++i) {
    const uint64_t neg = h[static_cast<size_t>(kLogSlots) + static_cast<size_t>(i)];
    const uint64_t all = h[static_cast<size_t>(i)] + neg + (i == kSlotNonfinite ? h[kValNan] : 0);
    switch (i) {
      case kSlotUnderflow:
        s.log_abs.underflow = all, s.log_abs_negative.underflow = neg;
        break;
      case kSlotOverflow:
        s.log_abs.overflow = all, s.log_abs_negative.overflow = neg;
        break;
      case kSlotZero:
        s.log_abs.zeros = all, s.log_abs_negative.zeros = neg;
        break;
      case kSlotNonfinite:
        s.log_abs.nonfinite = all, s.log_abs_negative.nonfinite = neg;
        break;
      default:
        all_bins[static_cast<size_t>(i)] = all;
        neg_bins[static_cast<size_t>(i)] = neg;
        break;
    }
  }
  s.log_abs.counts.assign(all_bins);
  s.log_abs_negative.counts.assign(neg_bins);
}

// ---- divergence ----
struct DivAcc {
  __m256i exact, nonfinite, ulp0, ulp1;  // ULP buckets 0 and 1, which take most elements, in vector counters
  __m256i one_side;                      // lanes where exactly one side was NaN/Inf (see SqFromValues)
  __m256i zero;                          // zero differences (their raw bin is the underflow one)
  __m256i lo, hi;                        // lane min/max of the non-zero raw bins of |diff| (as ValAcc's)
  __m256d sum_abs[2], sq_diff[2], sq_lp[2], sq_fp32[2], max_abs[2];
  alignas(64) uint32_t log[kSubLog][kRawMagnitudes];  // raw bins of |diff|; zero between calls
  alignas(64) uint64_t ulp[kUlpPad];                  // the other buckets
};

CKPTDOC_AVX2_INLINE void div_init(DivAcc& a) {
  a.exact = a.nonfinite = a.ulp0 = a.ulp1 = a.one_side = a.zero = _mm256_setzero_si256();
  a.lo = splat(kRawMagnitudes - 1);
  a.hi = _mm256_setzero_si256();
  for (int k = 0; k < 2; ++k)
    a.sum_abs[k] = a.sq_diff[k] = a.sq_lp[k] = a.sq_fp32[k] = a.max_abs[k] = _mm256_setzero_pd();
  std::memset(a.ulp, 0, sizeof a.ulp);
}

// Sums of squares of either side over the lanes where both are finite (nf: the others, all bits set).
CKPTDOC_AVX2_INLINE void div_sq(DivAcc& a, __m256 lp, __m256 m, __m256 nf) {
  const __m256 l = _mm256_andnot_ps(nf, lp);
  const __m256 f = _mm256_andnot_ps(nf, m);
  const __m256d l0 = _mm256_cvtps_pd(_mm256_castps256_ps128(l)),
                l1 = _mm256_cvtps_pd(_mm256_extractf128_ps(l, 1));
  const __m256d f0 = _mm256_cvtps_pd(_mm256_castps256_ps128(f)),
                f1 = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
  a.sq_lp[0] = _mm256_fmadd_pd(l0, l0, a.sq_lp[0]);
  a.sq_lp[1] = _mm256_fmadd_pd(l1, l1, a.sq_lp[1]);
  a.sq_fp32[0] = _mm256_fmadd_pd(f0, f0, a.sq_fp32[0]);
  a.sq_fp32[1] = _mm256_fmadd_pd(f1, f1, a.sq_fp32[1]);
}

// SqFromValues: the pass also gives both sides' value statistics, whose sums of squares are the divergence's
// (the same lanes in the same order, the same operations) unless a lane is NaN/Inf on one side only (the
// value statistics keep the other side's square, the divergence drops both): such lanes are only marked in
// one_side, and the pass recomputes the two sums (div_sq_pass) when any was seen.
//
// One 8-element step of the divergence pass. lp: float(lp); lp_bits: the lp patterns (16-bit ones
// zero-extended, or the float bits for F32). Writes the raw bin of |diff| | ulp bucket << 16 to idx, and to
// *rare the lanes whose bucket is above 1.
template <int K, bool SqFromValues>
CKPTDOC_AVX2_INLINE void div_add(DivAcc& a, __m256 lp, __m256i lp_bits, __m256 m, uint32_t* idx,
                                 uint8_t* rare) {
  const __m256i mi = _mm256_castps_si256(m);
  const __m256i abs31 = splat(0x7fffffff);
  const __m256i m_abs = _mm256_and_si256(mi, abs31);
  const __m256i lp_abs = _mm256_and_si256(_mm256_castps_si256(lp), abs31);
  const __m256i m_nan = _mm256_cmpgt_epi32(m_abs, splat(0x7f800000));  // rounding keeps NaN-ness
  const __m256i lp_nan = _mm256_cmpgt_epi32(lp_abs, splat(0x7f800000));
  const __m256i any_nan = _mm256_or_si256(lp_nan, m_nan);
  const bool no_nan = _mm256_testz_si256(any_nan, any_nan);  // nearly always: the NaN fix-ups are skipped
  __m256i exact, dist;
  if constexpr (K == kF32) {
    exact = _mm256_cmpeq_epi32(lp_bits, mi);
    // ordered32 distance, clamped to 65536: same signs subtract magnitudes, opposite signs add them (the sum
    // of two magnitudes below 2^31 fits 32 unsigned bits)
    const __m256i signs_differ = _mm256_cmpgt_epi32(_mm256_setzero_si256(), _mm256_xor_si256(lp_bits, mi));
    const __m256i d = _mm256_blendv_epi8(_mm256_abs_epi32(_mm256_sub_epi32(lp_abs, m_abs)),
                                         _mm256_add_epi32(lp_abs, m_abs), signs_differ);
    dist = _mm256_min_epu32(d, splat(65536));
  } else {
    __m256i r;
    if constexpr (K == kBF16) {
      const __m256i nan_r = _mm256_or_si256(_mm256_srli_epi32(mi, 16), splat(0x40));
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(mi, 16), splat(1));
      const __m256i rne = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(mi, splat(0x7fff)), lsb), 16);
      r = no_nan ? rne : _mm256_blendv_epi8(rne, nan_r, m_nan);
    } else {
      // F16C rounds to nearest even like f32_to_f16, subnormals included; NaN payloads are rebuilt the
      // scalar way (quiet bit set, top mantissa bits kept) rather than trusting the instruction's choice
      const __m256i rne = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(m, _MM_FROUND_TO_NEAREST_INT));
      const __m256i nan_r = _mm256_or_si256(
          _mm256_and_si256(_mm256_srli_epi32(mi, 16), splat(0x8000)),
          _mm256_or_si256(splat(0x7e00), _mm256_and_si256(_mm256_srli_epi32(m_abs, 13), splat(0x3ff))));
      r = no_nan ? rne : _mm256_blendv_epi8(rne, nan_r, m_nan);
    }
    exact = _mm256_cmpeq_epi32(r, lp_bits);
    dist = _mm256_abs_epi32(_mm256_sub_epi32(ordered16_8(lp_bits), ordered16_8(r)));
  }
  __m256i bucket = ulp_bucket8(dist);
  if (!no_nan) {
    bucket = _mm256_blendv_epi8(bucket, splat(UlpHistogram::kBuckets - 1), any_nan);
    bucket = _mm256_andnot_si256(_mm256_and_si256(lp_nan, m_nan), bucket);  // both NaN: 0
  }
  a.exact = _mm256_add_epi32(a.exact, exact);
  a.ulp0 = _mm256_add_epi32(a.ulp0, _mm256_cmpeq_epi32(bucket, _mm256_setzero_si256()));
  a.ulp1 = _mm256_add_epi32(a.ulp1, _mm256_cmpeq_epi32(bucket, splat(1)));
  *rare = static_cast<uint8_t>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(bucket, splat(1)))));

  const __m256i lp_nonfinite = _mm256_cmpgt_epi32(lp_abs, splat(0x7f7fffff));
  const __m256i m_nonfinite = _mm256_cmpgt_epi32(m_abs, splat(0x7f7fffff));
  const __m256i nonfinite = _mm256_or_si256(lp_nonfinite, m_nonfinite);
  if constexpr (SqFromValues)
    a.one_side = _mm256_or_si256(a.one_side, _mm256_xor_si256(lp_nonfinite, m_nonfinite));
  a.nonfinite = _mm256_add_epi32(a.nonfinite, nonfinite);
  const __m256i diff_abs = _mm256_and_si256(_mm256_castps_si256(_mm256_sub_ps(m, lp)), abs31);
  // a lane with a NaN/Inf side counts as non-finite: all exponent bits set put it in a non-finite raw bin
  const __m256i sel = _mm256_or_si256(diff_abs, _mm256_and_si256(nonfinite, splat(0x7f800000)));
  const __m256i zero = _mm256_cmpeq_epi32(sel, _mm256_setzero_si256());
  a.zero = _mm256_add_epi32(a.zero, zero);
  const __m256i raw = _mm256_srli_epi32(sel, kRawShift);
  a.lo = _mm256_min_epu32(a.lo, _mm256_or_si256(raw, zero));
  a.hi = _mm256_max_epu32(a.hi, _mm256_andnot_si256(zero, raw));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx), _mm256_or_si256(raw, _mm256_slli_epi32(bucket, 16)));

  const __m256 nf = _mm256_castsi256_ps(nonfinite);
  const __m256 d = _mm256_andnot_ps(nf, _mm256_castsi256_ps(diff_abs));
  const __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(d)),
                d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(d, 1));
  a.max_abs[0] = _mm256_max_pd(d0, a.max_abs[0]);
  a.max_abs[1] = _mm256_max_pd(d1, a.max_abs[1]);
  a.sum_abs[0] = _mm256_add_pd(a.sum_abs[0], d0);
  a.sum_abs[1] = _mm256_add_pd(a.sum_abs[1], d1);
  a.sq_diff[0] = _mm256_fmadd_pd(d0, d0, a.sq_diff[0]);
  a.sq_diff[1] = _mm256_fmadd_pd(d1, d1, a.sq_diff[1]);
  if constexpr (!SqFromValues) div_sq(a, lp, m, nf);
}

CKPTDOC_AVX2_INLINE void div_count(DivAcc& a, const uint32_t* idx, const uint8_t* rare, int n) {
  for (int j = 0; j < n; j += 8) {
    // unrolled by hand: at -O2 the compiler kept a loop whose control cost as much as the increments
    ++a.log[0][idx[j] & 0xffffu];
    ++a.log[1][idx[j + 1] & 0xffffu];
    ++a.log[2][idx[j + 2] & 0xffffu];
    ++a.log[3][idx[j + 3] & 0xffffu];
    ++a.log[0][idx[j + 4] & 0xffffu];
    ++a.log[1][idx[j + 5] & 0xffffu];
    ++a.log[2][idx[j + 6] & 0xffffu];
    ++a.log[3][idx[j + 7] & 0xffffu];
    for (unsigned r = rare[j / 8]; r != 0; r &= r - 1) ++a.ulp[idx[j + __builtin_ctz(r)] >> 16];
  }
}

CKPTDOC_AVX2_INLINE void div_finish(DivAcc& a, size_t n, DivergenceStats& s) {
  s = DivergenceStats{};
  s.count = n;
  s.exact = lane_total(a.exact);
  s.nonfinite = lane_total(a.nonfinite);
  s.sum_abs = lane_sum(a.sum_abs);
  s.sum_sq_diff = lane_sum(a.sq_diff);
  s.sum_sq_lp = lane_sum(a.sq_lp);
  s.sum_sq_fp32 = lane_sum(a.sq_fp32);
  alignas(32) double mx[4];
  _mm256_store_pd(mx, _mm256_max_pd(a.max_abs[0], a.max_abs[1]));
  s.max_abs = std::max(std::max(mx[0], mx[1]), std::max(mx[2], mx[3]));
  std::array<uint64_t, kLogSlots> slots{};
  const BinRange range = bin_range(a.lo, a.hi);
  for (int g = 0; g < range.end; g = next_group(range, g)) {
    alignas(32) uint32_t total[8];
    if (take_group(a.log, g, total)) continue;
    for (int r = g; r < g + 8; ++r)
      slots[static_cast<size_t>(r >= kRawNonfinite ? kSlotNonfinite : log_slot_of_raw(r))] += total[r - g];
  }
  const uint64_t zeros = lane_total(a.zero);
  slots[kSlotUnderflow] -= zeros;  // raw bin 0 held the zeros
  slots[kSlotZero] = zeros;
  std::array<uint64_t, kLogBins> bins{};
  for (int i = 0; i < kLogSlots; ++i) {
    const uint64_t c = slots[static_cast<size_t>(i)];
    switch (i) {
      case kSlotUnderflow:
        s.log_abs_diff.underflow = c;
        break;
      case kSlotOverflow:
        s.log_abs_diff.overflow = c;
        break;
      case kSlotZero:
        s.log_abs_diff.zeros = c;
        break;
      case kSlotNonfinite:
        s.log_abs_diff.nonfinite = c;
        break;
      default:
        bins[static_cast<size_t>(i)] = c;
        break;
    }
  }
  s.log_abs_diff.counts.assign(bins);
  std::array<uint64_t, UlpHistogram::kBuckets> ulp{};
  for (int b = 2; b < UlpHistogram::kBuckets; ++b) ulp[static_cast<size_t>(b)] = a.ulp[b];
  ulp[0] = lane_total(a.ulp0);
  ulp[1] = lane_total(a.ulp1);
  s.ulp.counts.assign(ulp);
}

// ---- the pass: loads, then whichever of the three results are wanted ----
template <int K>
CKPTDOC_AVX2_INLINE void load_lp(const void* p, size_t i, __m256& v, __m256i& bits) {
  if constexpr (K == kF32) {
    v = _mm256_loadu_ps(static_cast<const float*>(p) + i);
    bits = _mm256_castps_si256(v);
  } else {
    const __m128i raw =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    bits = _mm256_cvtepu16_epi32(raw);
    v = K == kF16 ? _mm256_cvtph_ps(raw) : _mm256_castsi256_ps(_mm256_slli_epi32(bits, 16));
  }
}

struct Accs {
  DivAcc div;
  ValAcc lp, fp32;
};

// This thread's accumulators, histograms zeroed (made once per thread; every finish leaves them zeroed).
Accs& thread_accs() {
  thread_local const std::unique_ptr<Accs> accs(new Accs());  // value-initialised: all zero
  return *accs;
}

// The divergence's sums of squares alone, over [begin, stop) as div_add computes them.
template <int K>
CKPTDOC_AVX2 void div_sq_pass(const void* lp, const float* fp32, size_t begin, size_t stop, DivAcc& a) {
  const __m256i abs31 = splat(0x7fffffff);
  for (size_t i = begin; i < stop; i += 8) {
    __m256 l;
    __m256i lb;
    load_lp<K>(lp, i, l, lb);
    const __m256 m = _mm256_loadu_ps(fp32 + i);
    const __m256i lp_abs = _mm256_and_si256(_mm256_castps_si256(l), abs31);
    const __m256i m_abs = _mm256_and_si256(_mm256_castps_si256(m), abs31);
    const __m256i nonfinite = _mm256_or_si256(_mm256_cmpgt_epi32(lp_abs, splat(0x7f7fffff)),
                                              _mm256_cmpgt_epi32(m_abs, splat(0x7f7fffff)));
    div_sq(a, l, m, _mm256_castsi256_ps(nonfinite));
  }
}

template <int K, bool Div, bool LpVals, bool Fp32Vals>
CKPTDOC_AVX2 size_t pass(const void* lp, const float* fp32, size_t begin, size_t end, Accs& acc) {
  const size_t stop = begin + ((end - begin) & ~size_t{7});
  if constexpr (Div) div_init(acc.div);
  if constexpr (LpVals) val_init(acc.lp);
  if constexpr (Fp32Vals) val_init(acc.fp32);
  alignas(32) uint32_t idx_div[kBlock], idx_lp[kBlock], idx_fp32[kBlock];
  uint8_t rare[kBlock / 8];
  for (size_t i = begin; i < stop;) {
    const size_t block_end = std::min(stop, i + kBlock);
    int k = 0;
    for (; i < block_end; i += 8, k += 8) {
      __m256 l;
      __m256i lb;
      load_lp<K>(lp, i, l, lb);
      // BF16 classifies like F32 on its float bits; F16 on its own bits
      if constexpr (LpVals)
        val_add<K == kF16>(acc.lp, l, K == kF16 ? lb : _mm256_castps_si256(l), idx_lp + k);
      if constexpr (Div || Fp32Vals) {
        const __m256 m = _mm256_loadu_ps(fp32 + i);
        if constexpr (Fp32Vals) val_add<false>(acc.fp32, m, _mm256_castps_si256(m), idx_fp32 + k);
        if constexpr (Div) div_add<K, LpVals && Fp32Vals>(acc.div, l, lb, m, idx_div + k, rare + k / 8);
      }
    }
    if constexpr (LpVals && Fp32Vals)
      val_count_delta(acc.lp, idx_lp, idx_fp32, k);
    else if constexpr (LpVals)
      val_count(acc.lp, idx_lp, k);
    if constexpr (Fp32Vals) val_count(acc.fp32, idx_fp32, k);
    if constexpr (Div) div_count(acc.div, idx_div, rare, k);
  }
  if constexpr (LpVals && Fp32Vals) {
    val_rebase(acc.lp, acc.fp32);
    if constexpr (Div) {
      if (_mm256_testz_si256(acc.div.one_side, acc.div.one_side)) {
        for (int h = 0; h < 2; ++h) {
          acc.div.sq_lp[h] = acc.lp.sq[h];
          acc.div.sq_fp32[h] = acc.fp32.sq[h];
        }
      } else {
        div_sq_pass<K>(lp, fp32, begin, stop, acc.div);
      }
    }
  }
  return stop - begin;
}

template <int K>
CKPTDOC_AVX2 size_t values_k(const void* data, size_t begin, size_t end, ValueStats& out) {
  Accs& acc = thread_accs();
  const size_t n = pass<K, false, true, false>(data, nullptr, begin, end, acc);
  val_finish<K == kF16>(acc.lp, n, out);
  return n;
}

template <int K>
CKPTDOC_AVX2 size_t divergence_k(const void* lp, const float* fp32, size_t begin, size_t end,
                                 DivergenceStats& div, ValueStats* lp_stats, ValueStats* fp32_stats) {
  Accs& acc = thread_accs();
  size_t n;
  if (lp_stats && fp32_stats) {
    n = pass<K, true, true, true>(lp, fp32, begin, end, acc);
    val_finish<K == kF16>(acc.lp, n, *lp_stats);
    val_finish<false>(acc.fp32, n, *fp32_stats);
  } else if (lp_stats) {
    n = pass<K, true, true, false>(lp, fp32, begin, end, acc);
    val_finish<K == kF16>(acc.lp, n, *lp_stats);
  } else if (fp32_stats) {
    n = pass<K, true, false, true>(lp, fp32, begin, end, acc);
    val_finish<false>(acc.fp32, n, *fp32_stats);
  } else {
    n = pass<K, true, false, false>(lp, fp32, begin, end, acc);
  }
  div_finish(acc.div, n, div);
  return n;
}

int kind_of(DType t) {
  switch (t) {
    case DType::F16:
      return kF16;
    case DType::BF16:
      return kBF16;
    case DType::F32:
      return kF32;
    default:
      return -1;
  }
}

}  // namespace

bool avx2_usable() {
  static const bool ok = [] {
    __builtin_cpu_init();
    // F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  }();
  return ok;
}

size_t values(const void* data, DType dtype, size_t begin, size_t end, ValueStats& out) {
  switch (kind_of(dtype)) {
    case kF16:
      return values_k<kF16>(data, begin, end, out);
    case kBF16:
      return values_k<kBF16>(data, begin, end, out);
    case kF32:
      return values_k<kF32>(data, begin, end, out);
    default:
      return 0;
  }
}

size_t divergence(const void* lp, DType lp_dtype, const float* fp32, size_t begin, size_t end,
                  DivergenceStats& div, ValueStats* lp_stats, ValueStats* fp32_stats) {
  switch (kind_of(lp_dtype)) {
    case kF16:
      return divergence_k<kF16>(lp, fp32, begin, end, div, lp_stats, fp32_stats);
    case kBF16:
      return divergence_k<kBF16>(lp, fp32, begin, end, div, lp_stats, fp32_stats);
    case kF32:
      return divergence_k<kF32>(lp, fp32, begin, end, div, lp_stats, fp32_stats);
    default:
      return 0;
  }
}

#else  // no x86-64 kernels in this build: the scalar code does everything

bool avx2_usable() {
  return false;
}
size_t values(const void*, DType, size_t, size_t, ValueStats&) {
  return 0;
}
size_t divergence(const void*, DType, const float*, size_t, size_t, DivergenceStats&, ValueStats*,
                  ValueStats*) {
  return 0;
}

#endif

}  // namespace ckptdoc::compute::simd
