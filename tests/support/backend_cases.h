#pragma once
// One backend against another (the CUDA backend against the CPU one) on the same random and edge data,
// Qt-free. Each case builds its input, runs both backends and returns compute_diff.h's verdict: empty = same
// (histogram counts and conversions exact, sums within kCaseRel relative). Shared by
// tests/gpu/test_compute_cuda.cpp (Qt Test) and tests/gpu/gpu_check.cpp (plain executable for a bare GPU
// machine).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ckptdoc/compute/backend.h"
#include "compute_diff.h"
#include "compute_reference.h"

namespace ckptdoc::test {

constexpr double kCaseRel = 1e-9;

struct BackendCase {
  std::string group;  // divergence | value_stats | fragment_stats | upcast | downcast
  std::string name;   // e.g. "bf16/9000001"
  std::function<std::string(Backend& dev, Backend& ref)> run;
};

inline const char* case_dtype_name(DType t) {
  switch (t) {
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F32:
      return "f32";
    default:
      return "f64";
  }
}

template <class T>
std::vector<unsigned char> as_bytes(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// lp side of a divergence input: f16/bf16 from make_lp, or fp32 with every third element one ULP up.
inline std::vector<unsigned char> make_lp_bytes(const std::vector<float>& m, DType t, uint32_t seed) {
  if (t != DType::F32) return as_bytes(make_lp(m, t, seed));
  std::vector<float> l = m;
  for (size_t i = 0; i < l.size(); i += 3) l[i] = std::nextafter(l[i], 1e30f);
  return as_bytes(l);
}

// Every 16-bit pattern (three times over, in a scrambled order) plus a tail: all NaN payloads, both
// infinities, both zeros, every subnormal.
inline std::vector<uint16_t> all_16bit_patterns() {
  std::vector<uint16_t> all(0x10000 * 3 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u);
  return all;
}

// Random fp32 bit patterns (NaNs with payloads, infinities, subnormals, both zeros, every exponent).
inline std::vector<float> random_f32_bits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    const uint32_t u = static_cast<uint32_t>(rng());
    std::memcpy(&x, &u, 4);
  }
  return v;
}

// Value-stats input of `t`: lp patterns, fp32 masters, or doubles with f64 edge values sprinkled in.
inline std::vector<unsigned char> make_value_bytes(DType t, size_t n, uint32_t seed) {
  const auto m = make_masters(n, seed, 1.0f);
  if (t == DType::F16 || t == DType::BF16) return as_bytes(make_lp(m, t, 3));
  if (t == DType::F32) return as_bytes(m);
  std::vector<double> d(m.begin(), m.end());
  // Edge values every 97 elements; none so large that sums could overflow in one order and not another.
  const double edges[] = {-0.0,
                          0.0,
                          std::numeric_limits<double>::denorm_min(),
                          -std::numeric_limits<double>::denorm_min(),
                          -2.2e-308,
                          1e-320,
                          std::numeric_limits<double>::quiet_NaN(),
                          -std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          3e38,
                          -3e-39,
                          1e-300};
  constexpr size_t kEdges = sizeof edges / sizeof edges[0];
  if (n > 2) {  // as the test always had them
    d[0] = 1e-310;
    d[1] = -1e300;
  }
  for (size_t i = 2, k = 0; i < d.size(); i += 97, ++k) d[i] = edges[k % kEdges];
  if (n > 100) d[n / 2] = std::numeric_limits<double>::max();  // once: sum_sq is +Inf in every order
  return as_bytes(d);
}

// Random doubles with a moderate exponent range (|x| in [1e-30, 1e30]) and random signs: full-range random
// bits would make the sums overflow in one summation order and not in another.
inline std::vector<double> random_f64(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-100, 100);
  std::vector<double> v(n);
  for (auto& x : v) x = ((rng() & 1) ? -1.0 : 1.0) * std::ldexp(mant(rng), ex(rng));
  return v;
}

// value_stats of both backends: the diff, then the sign of a zero minimum/maximum (the first zero's sign).
inline std::string compare_values(Backend& dev, Backend& ref, const void* data, DType t, size_t n) {
  const auto g = dev.value_stats(data, t, n);
  const auto c = ref.value_stats(data, t, n);
  if (auto d = diff_values(g, c, kCaseRel); !d.empty()) return d;
  if (g.finite_count() > 0) {
    if (std::signbit(g.min) != std::signbit(c.min)) return diff_f64("min (sign)", g.min, c.min, -1.0);
    if (std::signbit(g.max) != std::signbit(c.max)) return diff_f64("max (sign)", g.max, c.max, -1.0);
  }
  return {};
}

inline std::string compare_divergence(Backend& dev, Backend& ref, const void* lp, DType t, const float* m,
                                      size_t n) {
  return diff_divergence(dev.divergence(lp, t, m, n), ref.divergence(lp, t, m, n), kCaseRel);
}

inline std::string compare_fragment(Backend& dev, Backend& ref, const void* lp, DType t, const float* m,
                                    size_t n) {
  const auto g = dev.fragment_stats(lp, t, m, n);
  const auto c = ref.fragment_stats(lp, t, m, n);
  if (auto d = diff_divergence(g.divergence, c.divergence, kCaseRel); !d.empty()) return "divergence: " + d;
  if (auto d = diff_values(g.lp, c.lp, kCaseRel); !d.empty()) return "lp values: " + d;
  if (auto d = diff_values(g.fp32, c.fp32, kCaseRel); !d.empty()) return "fp32 values: " + d;
  return {};
}

inline std::string compare_upcast(Backend& dev, Backend& ref, const uint16_t* in, DType t, size_t n) {
  std::vector<float> g(n, 1.0f), c(n, 2.0f);
  dev.upcast(in, t, g.data(), n);
  ref.upcast(in, t, c.data(), n);
  return diff_bits(g.data(), c.data(), n, 4);
}

inline std::string compare_downcast(Backend& dev, Backend& ref, const float* in, DType t, size_t n) {
  std::vector<uint16_t> g(n, 1), c(n, 2);
  dev.downcast(in, t, g.data(), n);
  ref.downcast(in, t, c.data(), n);
  return diff_bits(g.data(), c.data(), n, 2);
}

// Downcast edge values: ties to even at every rounding boundary kind, overflow to Inf, the largest finite,
// subnormal results, NaN payloads (quiet and signalling, both signs), +-Inf, +-0.
inline std::vector<float> downcast_edges() {
  std::vector<float> v;
  auto bits = [&](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  };
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                     0x7f800001u, 0xff800001u, 0x7fa00000u, 0x7fbfffffu, 0x7fffffffu, 0x00000001u,
                     0x80000001u, 0x007fffffu, 0x00800000u, 0x7f7fffffu, 0xff7fffffu})
    bits(u);
  // bf16: halfway between two bf16 values (low 16 bits 0x8000) with even and odd kept bits, and one
  // above/below
  for (uint32_t hi : {0x3f80u, 0x3f81u, 0x7f7fu, 0x0000u, 0x0001u, 0x8000u, 0xbf81u, 0x7f7eu})
    for (uint32_t lo : {0x7fffu, 0x8000u, 0x8001u, 0xffffu}) bits(hi << 16 | lo);
  // fp16: largest finite, the overflow boundary (65520 rounds to Inf, just below stays 65504), beyond
  for (float f : {65504.0f, 65519.996f, 65520.0f, 65536.0f, -65520.0f, -65519.996f, 1e10f, -1e30f,
                  std::numeric_limits<float>::max()})
    v.push_back(f);
  // fp16: exact ties between neighbouring halves, normal and subnormal, both signs
  for (uint16_t h : {0x0000, 0x0001, 0x0002, 0x03fe, 0x03ff, 0x0400, 0x0401, 0x3bff, 0x3c00, 0x3c01, 0x7bfe,
                     0x8001, 0x83ff, 0xbc00, 0xfbfe}) {
    const double a = half_to_float(h), b = half_to_float(static_cast<uint16_t>(h + 1));
    v.push_back(static_cast<float>((a + b) / 2));
    v.push_back(std::nextafter(static_cast<float>((a + b) / 2), 1e30f));
    v.push_back(std::nextafter(static_cast<float>((a + b) / 2), -1e30f));
  }
  // half of the smallest fp16 subnormal (ties to 0) and just above it
  v.push_back(std::ldexp(1.0f, -25));
  v.push_back(std::nextafter(std::ldexp(1.0f, -25), 1.0f));
  v.push_back(-std::ldexp(1.0f, -25));
  v.push_back(std::ldexp(3.0f, -25));
  return v;
}

// The downcast input of the Qt test: random bit patterns with fp16 ties every 1001 elements, plus the edges.
inline std::vector<float> make_downcast_input(size_t n) {
  auto in = random_f32_bits(n, 5);
  for (size_t i = 0; i + 1 < in.size(); i += 1001) {  // fp16 ties
    const float a = half_to_float(static_cast<uint16_t>(i & 0x7bff));
    const float b = half_to_float(static_cast<uint16_t>((i & 0x7bff) + 1));
    in[i] = static_cast<float>((static_cast<double>(a) + b) / 2);
  }
  const auto e = downcast_edges();
  for (size_t i = 0; i < e.size() && i < in.size(); ++i) in[in.size() - 1 - i] = e[i];
  return in;
}

inline std::vector<BackendCase> backend_cases() {
  std::vector<BackendCase> cases;
  // divergence: f16/bf16/f32 lp against fp32 masters at sizes below, at and past one staged tile (4Mi)
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4'194'311}, size_t{9'000'001}})
      cases.push_back({"divergence", std::string(case_dtype_name(t)) + "/" + std::to_string(n),
                       [t, n](Backend& dev, Backend& ref) {
                         const auto m = make_masters(n, 31 + static_cast<uint32_t>(n));
                         const auto lp = make_lp_bytes(m, t, 17);
                         return compare_divergence(dev, ref, lp.data(), t, m.data(), n);
                       }});
  // divergence of every 16-bit pattern against masters that are themselves edge values
  for (DType t : {DType::F16, DType::BF16})
    cases.push_back(
        {"divergence", std::string(case_dtype_name(t)) + "/all-patterns", [t](Backend& dev, Backend& ref) {
           const auto lp = all_16bit_patterns();
           auto m = random_f32_bits(lp.size(), 23);
           const auto e = downcast_edges();
           for (size_t i = 0; i < e.size(); ++i) m[i * 7] = e[i];
           return compare_divergence(dev, ref, lp.data(), t, m.data(), lp.size());
         }});

  // value_stats: f16/bf16/f32/f64 with NaN, +-Inf, subnormals, +-0 injected (make_masters, make_value_bytes)
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64})
    for (size_t n : {size_t{0}, size_t{3}, size_t{4'194'304}, size_t{6'000'013}})
      cases.push_back({"value_stats", std::string(case_dtype_name(t)) + "/" + std::to_string(n),
                       [t, n](Backend& dev, Backend& ref) {
                         const auto buf = make_value_bytes(t, n, 41 + static_cast<uint32_t>(n));
                         return compare_values(dev, ref, buf.data(), t, n);
                       }});
  for (DType t : {DType::F16, DType::BF16})
    cases.push_back(
        {"value_stats", std::string(case_dtype_name(t)) + "/all-patterns", [t](Backend& dev, Backend& ref) {
           const auto all = all_16bit_patterns();
           return compare_values(dev, ref, all.data(), t, all.size());
         }});
  cases.push_back({"value_stats", "f32/random-bits", [](Backend& dev, Backend& ref) {
                     const auto v = random_f32_bits(3'000'017, 9);
                     return compare_values(dev, ref, v.data(), DType::F32, v.size());
                   }});
  cases.push_back({"value_stats", "f64/random", [](Backend& dev, Backend& ref) {
                     auto v = random_f64(3'000'019, 11);
                     const auto edges = make_value_bytes(DType::F64, 1000, 12);
                     std::memcpy(v.data() + 1000, edges.data(), edges.size());
                     return compare_values(dev, ref, v.data(), DType::F64, v.size());
                   }});
  // zero extremes: the sign of a zero minimum (maximum) is that of the first zero, wherever it falls
  for (bool negative_first : {true, false})
    for (size_t first : {size_t{0}, size_t{5}, size_t{4'194'303}, size_t{4'194'304}, size_t{5'000'000}})
      cases.push_back({"value_stats",
                       std::string("zero-extremes/") + (negative_first ? "neg" : "pos") + "-first-at-" +
                           std::to_string(first),
                       [negative_first, first](Backend& dev, Backend& ref) {
                         std::vector<float> up(6'000'011, 1.5f), down(6'000'011, -1.5f);
                         for (size_t i = first; i < up.size(); i += 999'983) {
                           const float z = ((i == first) == negative_first) ? -0.0f : 0.0f;
                           up[i] = z;
                           down[i] = z;
                         }
                         if (auto d = compare_values(dev, ref, up.data(), DType::F32, up.size()); !d.empty())
                           return "min: " + d;
                         if (auto d = compare_values(dev, ref, down.data(), DType::F32, down.size());
                             !d.empty())
                           return "max: " + d;
                         return std::string();
                       }});

  // fragment_stats: divergence and both sides' value stats in one call
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    for (size_t n : {size_t{0}, size_t{7}, size_t{4'194'311}, size_t{9'000'001}})
      cases.push_back({"fragment_stats", std::string(case_dtype_name(t)) + "/" + std::to_string(n),
                       [t, n](Backend& dev, Backend& ref) {
                         const auto m = make_masters(n, 53 + static_cast<uint32_t>(n));
                         const auto lp = make_lp_bytes(m, t, 19);
                         return compare_fragment(dev, ref, lp.data(), t, m.data(), n);
                       }});

  // upcast: every 16-bit pattern, bit exact; and a length past one tile
  for (DType t : {DType::F16, DType::BF16}) {
    cases.push_back(
        {"upcast", std::string(case_dtype_name(t)) + "/all-patterns", [t](Backend& dev, Backend& ref) {
           const auto all = all_16bit_patterns();
           return compare_upcast(dev, ref, all.data(), t, all.size());
         }});
    cases.push_back({"upcast", std::string(case_dtype_name(t)) + "/9000001", [t](Backend& dev, Backend& ref) {
                       const auto m = make_masters(9'000'001, 61);
                       const auto lp = make_lp(m, t, 7);
                       return compare_upcast(dev, ref, lp.data(), t, lp.size());
                     }});
    cases.push_back({"upcast", std::string(case_dtype_name(t)) + "/0",
                     [t](Backend& dev, Backend& ref) { return compare_upcast(dev, ref, nullptr, t, 0); }});
  }
  // downcast: random bit patterns, fp16 ties, edges (ties to even, overflow, NaN, Inf, subnormals), bit exact
  for (DType t : {DType::F16, DType::BF16}) {
    cases.push_back({"downcast", std::string(case_dtype_name(t)) + "/edges", [t](Backend& dev, Backend& ref) {
                       const auto e = downcast_edges();
                       return compare_downcast(dev, ref, e.data(), t, e.size());
                     }});
    cases.push_back(
        {"downcast", std::string(case_dtype_name(t)) + "/9000003", [t](Backend& dev, Backend& ref) {
           const auto in = make_downcast_input(9'000'003);
           return compare_downcast(dev, ref, in.data(), t, in.size());
         }});
    cases.push_back({"downcast", std::string(case_dtype_name(t)) + "/0",
                     [t](Backend& dev, Backend& ref) { return compare_downcast(dev, ref, nullptr, t, 0); }});
  }
  return cases;
}

}  // namespace ckptdoc::test
