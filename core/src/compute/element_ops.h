#pragma once
// Per-element classification and conversion shared by the CPU backend (g++) and the CUDA kernels (nvcc), so
// both put every element in the same bin. Integer operations on IEEE bits wherever a bin or a class is
// decided; float arithmetic only where IEEE round-to-nearest gives the same answer on both (one subtraction).
// Plain header: no spdlog/fmt, nothing that nvcc in C++20 mode rejects.
#include <cstdint>
#include <cstring>

#include "ckptdoc/compute/statistics.h"

#if defined(__CUDACC__)
#define CKPTDOC_HD __host__ __device__ __forceinline__
#else
#define CKPTDOC_HD inline
#endif

namespace ckptdoc::compute {

// ---- bit casts usable on both sides ----
CKPTDOC_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
CKPTDOC_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
CKPTDOC_HD uint64_t f64_bits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
#endif
}

// ---- conversions, bit-exact with ckptdoc::half_to_float / float_to_half / bf16 in dtype.h ----
CKPTDOC_HD float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  uint32_t bits;
  if (em >= 0x7c00u) {
    bits = 0x7f800000u | ((em & 0x3ffu) << 13);
  } else if (em >= 0x0400u) {
    bits = (em << 13) + 0x38000000u;  // rebias exponent: +(127-15) << 23
  } else {
    // zero or subnormal: em * 2^-24, both factors exact and so is the product
    bits = f32_bits(static_cast<float>(em) * 5.9604644775390625e-8f);
  }
  return bits_f32(bits | sign);
}

CKPTDOC_HD uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (abs > 0x7f800000u ? (0x200u | ((abs >> 13) & 0x3ffu)) : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {  // half subnormal or zero: units of 2^-24, round half to even
    const uint32_t e = abs >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero (2^-25 itself ties to 0)
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t r = abs + 0x00000fffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

CKPTDOC_HD float bf16_to_f32(uint16_t b) {
  return bits_f32(static_cast<uint32_t>(b) << 16);
}

CKPTDOC_HD uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---- log histogram slots: 0..kBins-1 the bins, then underflow, overflow, zero, non-finite ----
constexpr int kLogBins = LogHistogram::kBins;
constexpr int kSlotUnderflow = kLogBins;
constexpr int kSlotOverflow = kLogBins + 1;
constexpr int kSlotZero = kLogBins + 2;
constexpr int kSlotNonfinite = kLogBins + 3;
constexpr int kLogSlots = kLogBins + 4;

// Bin of a finite non-zero magnitude from float bits: -1 below the range, kBins above.
CKPTDOC_HD int log_bin_from_f32_bits(uint32_t abs_bits) {
  const int e = static_cast<int>(abs_bits >> 23) - 127;  // float subnormals give -127: below the range
  if (e < LogHistogram::kLogMinExp) return -1;
  if (e >= LogHistogram::kLogMaxExp) return kLogBins;
  return (e - LogHistogram::kLogMinExp) * 4 + static_cast<int>((abs_bits >> 21) & 3u);
}

CKPTDOC_HD int log_slot_f32(float v) {
  const uint32_t a = f32_bits(v) & 0x7fffffffu;
  if (a >= 0x7f800000u) return kSlotNonfinite;
  if (a == 0) return kSlotZero;
  const int b = log_bin_from_f32_bits(a);
  return b < 0 ? kSlotUnderflow : (b >= kLogBins ? kSlotOverflow : b);
}

CKPTDOC_HD int log_slot_f64(double v) {
  const uint64_t a = f64_bits(v) & 0x7fffffffffffffffull;
  if (a >= 0x7ff0000000000000ull) return kSlotNonfinite;
  if (a == 0) return kSlotZero;
  const int e = static_cast<int>(a >> 52) - 1023;
  if (e < LogHistogram::kLogMinExp) return kSlotUnderflow;
  if (e >= LogHistogram::kLogMaxExp) return kSlotOverflow;
  return (e - LogHistogram::kLogMinExp) * 4 + static_cast<int>((a >> 50) & 3u);
}

// ---- value classes from the element's own bits (a half subnormal is a subnormal even though its float is
// normal) ----
enum ValueClass : int { kNormal = 0, kSubnormal = 1, kZero = 2, kNan = 3, kPosInf = 4, kNegInf = 5 };

template <int ExpBits, int MantBits, class U>
CKPTDOC_HD int classify_bits(U bits) {
  constexpr int kTotal = 1 + ExpBits + MantBits;
  const U exp_mask = static_cast<U>((U{1} << ExpBits) - 1u);
  const U mant_mask = static_cast<U>((U{1} << MantBits) - 1u);
  const U exp = static_cast<U>((bits >> MantBits) & exp_mask);
  const U mant = static_cast<U>(bits & mant_mask);
  const bool neg = ((bits >> (kTotal - 1)) & 1u) != 0;
  if (exp == exp_mask) return mant != 0 ? kNan : (neg ? kNegInf : kPosInf);
  if (exp == 0) return mant != 0 ? kSubnormal : kZero;
  return kNormal;
}
CKPTDOC_HD int classify_f16(uint16_t h) {
  return classify_bits<5, 10, uint32_t>(h);
}
CKPTDOC_HD int classify_bf16(uint16_t b) {
  return classify_bits<8, 7, uint32_t>(b);
}
CKPTDOC_HD int classify_f32(uint32_t x) {
  return classify_bits<8, 23, uint32_t>(x);
}
CKPTDOC_HD int classify_f64(uint64_t x) {
  return classify_bits<11, 52, uint64_t>(x);
}

// ---- ULP distance between two lp bit patterns on the ordered-integer line (+0 and -0 both map to 0) ----
CKPTDOC_HD int32_t ordered16(uint32_t h) {
  return (h & 0x8000u) ? -static_cast<int32_t>(h & 0x7fffu) : static_cast<int32_t>(h & 0x7fffu);
}
CKPTDOC_HD int64_t ordered32(uint32_t x) {
  return (x & 0x80000000u) ? -static_cast<int64_t>(x & 0x7fffffffu) : static_cast<int64_t>(x);
}

CKPTDOC_HD int ulp_bucket(uint32_t d) {
  if (d == 0) return 0;
  if (d >= 65536u) return UlpHistogram::kBuckets - 1;
    // floor(log2 d) + 1, d > 0
#if defined(__CUDA_ARCH__)
  return 32 - __clz(static_cast<int>(d));
#else
  return 32 - __builtin_clz(d);
#endif
}

// Bucket of the distance between stored lp bits and round_to_lp(fp32) bits. Both NaN: 0; one NaN: the last.
CKPTDOC_HD int ulp_bucket16(uint32_t stored, uint32_t rounded, bool stored_nan, bool rounded_nan) {
  if (stored_nan || rounded_nan) return (stored_nan && rounded_nan) ? 0 : UlpHistogram::kBuckets - 1;
  const int32_t d = ordered16(stored) - ordered16(rounded);
  return ulp_bucket(static_cast<uint32_t>(d < 0 ? -d : d));
}
CKPTDOC_HD int ulp_bucket32(uint32_t stored, uint32_t rounded) {
  const bool sn = (stored & 0x7fffffffu) > 0x7f800000u, rn = (rounded & 0x7fffffffu) > 0x7f800000u;
  if (sn || rn) return (sn && rn) ? 0 : UlpHistogram::kBuckets - 1;
  int64_t d = ordered32(stored) - ordered32(rounded);
  if (d < 0) d = -d;
  return ulp_bucket(d >= 65536 ? 65536u : static_cast<uint32_t>(d));
}

// Everything the divergence pass needs from one element.
struct DivergenceElement {
  bool exact;
  bool finite;  // both sides finite: the element enters the sums
  int ulp_bucket;
  int log_slot;    // of |fp32 - float(lp)|; kSlotNonfinite when !finite
  float lp;        // float(lp)
  float master;    // fp32
  float abs_diff;  // |fp32 - float(lp)|, computed in float
};

// lp_kind: 0 = F16, 1 = BF16, 2 = F32.
CKPTDOC_HD DivergenceElement divergence_element16(uint16_t lp_bits, float master, bool is_bf16) {
  DivergenceElement e{};
  const uint16_t rounded = is_bf16 ? f32_to_bf16(master) : f32_to_f16(master);
  e.lp = is_bf16 ? bf16_to_f32(lp_bits) : f16_to_f32(lp_bits);
  e.master = master;
  e.exact = rounded == lp_bits;
  const uint32_t lp_abs = f32_bits(e.lp) & 0x7fffffffu;
  const uint32_t m_abs = f32_bits(master) & 0x7fffffffu;
  const bool lp_nan = lp_abs > 0x7f800000u, r_nan = m_abs > 0x7f800000u;  // rounding keeps NaN-ness
  e.ulp_bucket = ulp_bucket16(lp_bits, rounded, lp_nan, r_nan);
  e.finite = lp_abs < 0x7f800000u && m_abs < 0x7f800000u;
  e.abs_diff = e.finite ? bits_f32(f32_bits(master - e.lp) & 0x7fffffffu) : 0.0f;
  e.log_slot = e.finite ? log_slot_f32(e.abs_diff) : kSlotNonfinite;
  return e;
}

CKPTDOC_HD DivergenceElement divergence_element32(float lp, float master) {
  DivergenceElement e{};
  const uint32_t lb = f32_bits(lp), mb = f32_bits(master);
  e.lp = lp;
  e.master = master;
  e.exact = lb == mb;
  e.ulp_bucket = ulp_bucket32(lb, mb);
  e.finite = (lb & 0x7fffffffu) < 0x7f800000u && (mb & 0x7fffffffu) < 0x7f800000u;
  e.abs_diff = e.finite ? bits_f32(f32_bits(master - lp) & 0x7fffffffu) : 0.0f;
  e.log_slot = e.finite ? log_slot_f32(e.abs_diff) : kSlotNonfinite;
  return e;
}

}  // namespace ckptdoc::compute
