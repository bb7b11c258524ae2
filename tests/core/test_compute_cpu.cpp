// The CPU compute backend against a plain reference on random data with NaN/Inf/subnormal/zero injected,
// its conversions against dtype.h (all 16-bit patterns, many floats) and against torch, and determinism
// across thread counts.
#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "backend_cases.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/compute/placement.h"
#include "ckptdoc/compute/reduction.h"
#include "ckptdoc/error.h"
#include "compute_compare.h"
#include "compute_reference.h"
#include "test_support.h"

using namespace ckptdoc;
using namespace ckptdoc::test;

namespace {

constexpr double kRel = 1e-9;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Floats that stress rounding: ties and near-ties of both lp formats, format edges, random bit patterns.
std::vector<float> conversion_inputs() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every half and the midpoints to its neighbour
    const float a = half_to_float(static_cast<uint16_t>(h));
    const float b = half_to_float(static_cast<uint16_t>(h + 1));
    v.push_back(a);
    if (std::isfinite(a) && std::isfinite(b) && (h & 0x7fff) != 0x7fff) {
      const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);  // exact: 12 significant bits
      v.push_back(mid);
      v.push_back(std::nextafter(mid, 0.0f));
      v.push_back(std::nextafter(mid, std::numeric_limits<float>::infinity()));
      v.push_back(-mid);
    }
  }
  for (uint32_t b = 0; b < 0x10000; b += 7) {  // bf16 ties: low half exactly 0x8000, and neighbours
    const uint32_t x = (b << 16) | 0x8000u;
    v.push_back(float_of(x));
    v.push_back(float_of(x - 1));
    v.push_back(float_of(x + 1));
  }
  const float edges[] = {65504.0f,
                         65519.996f,
                         65520.0f,
                         65536.0f,
                         6.1035156e-05f,
                         5.9604645e-08f,
                         2.9802322e-08f,
                         2.9802326e-08f,
                         8.940697e-08f,
                         1e-30f,
                         1.4e-45f,
                         3.4028235e38f,
                         std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(),
                         float_of(0x7f800001u),
                         float_of(0xffc12345u),
                         float_of(0x7fbfffffu),
                         -0.0f,
                         0.0f};
  for (float e : edges) {
    v.push_back(e);
    v.push_back(-e);
  }
  std::mt19937 rng(1234);
  for (int i = 0; i < 1000000; ++i) v.push_back(float_of(static_cast<uint32_t>(rng())));
  for (uint64_t x = 0; x < 0x100000000ull; x += 4093) v.push_back(float_of(static_cast<uint32_t>(x)));
  return v;
}

}  // namespace

class TestComputeCpu : public QObject {
  Q_OBJECT

 private slots:
  void log_histogram_bins() {
    QCOMPARE(LogHistogram::bin_of(1.0f), (0 - LogHistogram::kLogMinExp) * 4);
    QCOMPARE(LogHistogram::bin_of(1.25f), (0 - LogHistogram::kLogMinExp) * 4 + 1);
    QCOMPARE(LogHistogram::bin_of(1.9999f), (0 - LogHistogram::kLogMinExp) * 4 + 3);
    QCOMPARE(LogHistogram::bin_of(std::ldexp(1.0f, LogHistogram::kLogMinExp)), 0);
    QCOMPARE(LogHistogram::bin_of(std::nextafter(std::ldexp(1.0f, LogHistogram::kLogMinExp), 0.0f)), -1);
    QCOMPARE(LogHistogram::bin_of(std::ldexp(1.0f, LogHistogram::kLogMaxExp)), LogHistogram::kBins);
    QCOMPARE(LogHistogram::bin_of(1e-40f), -1);  // float subnormal
    for (int i = 0; i < LogHistogram::kBins; ++i) {
      const double e = LogHistogram::lower_edge(i);
      QCOMPARE(LogHistogram::bin_of(static_cast<float>(e)), i);
      QCOMPARE(LogHistogram::bin_of(std::nextafter(static_cast<float>(e), 0.0f)), i - 1);
      QVERIFY(std::fabs(LogHistogram::log10_lower_edge(i) - std::log10(e)) < 1e-12);
    }
    // bin_of agrees with the frexp reference on random magnitudes over the whole float range
    std::mt19937 rng(7);
    for (int i = 0; i < 200000; ++i) {
      const float a = std::fabs(float_of(static_cast<uint32_t>(rng())));
      if (!std::isfinite(a) || a == 0) continue;
      QCOMPARE(LogHistogram::bin_of(a), ref_log_bin(a));
    }
    LogHistogram h, g;
    for (float x : {0.0f, -0.0f, 1.0f, -3.0f, 1e-30f, 1e30f, std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::infinity()})
      h.add(x);
    QCOMPARE(h.zeros, uint64_t{2});
    QCOMPARE(h.underflow, uint64_t{1});
    QCOMPARE(h.overflow, uint64_t{1});
    QCOMPARE(h.nonfinite, uint64_t{2});
    QCOMPARE(h.total(), uint64_t{8});
    g.add(1.0f);
    g.merge(h);
    QCOMPARE(g.total(), uint64_t{9});
    QCOMPARE(g.counts[static_cast<size_t>(LogHistogram::bin_of(1.0f))], uint64_t{2});
  }

  void ulp_histogram_buckets() {
    QCOMPARE(UlpHistogram::bucket_of(0), 0);
    QCOMPARE(UlpHistogram::bucket_of(1), 1);
    QCOMPARE(UlpHistogram::bucket_of(2), 2);
    QCOMPARE(UlpHistogram::bucket_of(3), 2);
    QCOMPARE(UlpHistogram::bucket_of(4), 3);
    QCOMPARE(UlpHistogram::bucket_of(65535), 16);
    QCOMPARE(UlpHistogram::bucket_of(65536), 17);
    QCOMPARE(UlpHistogram::bucket_of(0xffffffffu), 17);
    for (uint32_t d = 0; d < 70000; ++d) QCOMPARE(UlpHistogram::bucket_of(d), ref_bucket(d));
    QCOMPARE(UlpHistogram::bucket_label(0), std::string("0"));
    QCOMPARE(UlpHistogram::bucket_label(1), std::string("1"));
    QCOMPARE(UlpHistogram::bucket_label(2), std::string("2-3"));
    QCOMPARE(UlpHistogram::bucket_label(3), std::string("4-7"));
    QCOMPARE(UlpHistogram::bucket_label(16), std::string("32768-65535"));
    QCOMPARE(UlpHistogram::bucket_label(17), std::string(">=65536"));
  }

  void derived_statistics() {
    DivergenceStats d;
    QCOMPARE(d.rel_l2(), 0.0);
    QCOMPARE(d.exact_fraction(), 0.0);
    QCOMPARE(d.mean_abs(), 0.0);
    d.count = 4;
    d.exact = 1;
    d.sum_sq_diff = 1;
    QVERIFY(std::isinf(d.rel_l2()));
    d.sum_sq_lp = 4;
    QCOMPARE(d.rel_l2(), 0.5);
    QCOMPARE(d.exact_fraction(), 0.25);
    d.nonfinite = 2;
    d.sum_abs = 3;
    QCOMPARE(d.mean_abs(), 1.5);

    ValueStats a, b, empty;
    a.count = 2;
    a.sum = 2;
    a.sum_sq = 8;
    a.min = -2;
    a.max = 2;
    QCOMPARE(a.mean(), 1.0);
    QCOMPARE(a.rms(), 2.0);
    b.count = 1;
    b.nan = 1;
    b.min = -100;  // meaningless: b has no finite values
    b.max = 100;
    ValueStats m = empty;
    m.merge(b);
    m.merge(a);
    QCOMPARE(m.count, uint64_t{3});
    QCOMPARE(m.min, -2.0);
    QCOMPARE(m.max, 2.0);
  }

  void upcast_all_patterns_exact() {
    auto cpu = make_cpu_backend(2);
    std::vector<uint16_t> all(0x10000);
    for (uint32_t i = 0; i < 0x10000; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> out(all.size());
    cpu->upcast(all.data(), DType::F16, out.data(), all.size());
    for (uint32_t i = 0; i < 0x10000; ++i)
      QVERIFY2(bits_of(out[i]) == bits_of(half_to_float(all[i])),
               qPrintable(QString("f16 %1").arg(i, 4, 16)));
    cpu->upcast(all.data(), DType::BF16, out.data(), all.size());
    for (uint32_t i = 0; i < 0x10000; ++i)
      QVERIFY2(bits_of(out[i]) == bits_of(bf16_to_float(all[i])),
               qPrintable(QString("bf16 %1").arg(i, 4, 16)));
  }

  void downcast_matches_dtype_h() {
    auto cpu = make_cpu_backend(2);
    const auto in = conversion_inputs();
    std::vector<uint16_t> out(in.size());
    cpu->downcast(in.data(), DType::F16, out.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i)
      QVERIFY2(out[i] == float_to_half(in[i]), qPrintable(QString("f16 of %1: %2 vs %3")
                                                              .arg(bits_of(in[i]), 8, 16)
                                                              .arg(out[i])
                                                              .arg(float_to_half(in[i]))));
    cpu->downcast(in.data(), DType::BF16, out.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i)
      QVERIFY2(out[i] == float_to_bf16(in[i]), qPrintable(QString("bf16 of %1").arg(bits_of(in[i]), 8, 16)));
    std::vector<float> same(in.size());
    cpu->downcast(in.data(), DType::F32, same.data(), in.size());
    QVERIFY(std::memcmp(same.data(), in.data(), in.size() * 4) == 0);
  }

  void downcast_matches_torch() {
    auto cpu = make_cpu_backend(2);
    const auto in = conversion_inputs();
    TempDir dir;
    {
      std::ofstream f(dir.file("in.f32"), std::ios::binary);
      f.write(reinterpret_cast<const char*>(in.data()), static_cast<std::streamsize>(in.size() * 4));
    }
    const auto r = run_python(script("fixtures/compute_reference.py"),
                              {dir.file("in.f32"), dir.file("out.f16"), dir.file("out.bf16")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    for (DType t : {DType::F16, DType::BF16}) {
      std::vector<uint16_t> torch_out(in.size()), mine(in.size());
      std::ifstream f(dir.file(t == DType::F16 ? "out.f16" : "out.bf16"), std::ios::binary);
      f.read(reinterpret_cast<char*>(torch_out.data()), static_cast<std::streamsize>(in.size() * 2));
      QVERIFY(f.gcount() == static_cast<std::streamsize>(in.size() * 2));
      cpu->downcast(in.data(), t, mine.data(), in.size());
      size_t nans = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        if (std::isnan(in[i])) {  // torch canonicalises NaN payloads, ckptdoc keeps them: NaN-ness must agree
          const float a = t == DType::F16 ? half_to_float(mine[i]) : bf16_to_float(mine[i]);
          const float b = t == DType::F16 ? half_to_float(torch_out[i]) : bf16_to_float(torch_out[i]);
          QVERIFY(std::isnan(a) && std::isnan(b));
          ++nans;
          continue;
        }
        QVERIFY2(mine[i] == torch_out[i], qPrintable(QString("%1 of %2: ckptdoc %3, torch %4")
                                                         .arg(t == DType::F16 ? "f16" : "bf16")
                                                         .arg(bits_of(in[i]), 8, 16)
                                                         .arg(mine[i], 4, 16)
                                                         .arg(torch_out[i], 4, 16)));
      }
      QVERIFY(nans > 1000);
    }
  }

  void value_stats_match_reference_data() {
    QTest::addColumn<int>("dtype");
    QTest::newRow("f16") << int(DType::F16);
    QTest::newRow("bf16") << int(DType::BF16);
    QTest::newRow("f32") << int(DType::F32);
    QTest::newRow("f64") << int(DType::F64);
  }
  void value_stats_match_reference() {
    QFETCH(int, dtype);
    const auto t = static_cast<DType>(dtype);
    const size_t n = 3'000'017;  // three chunks and a ragged tail
    const auto masters = make_masters(n, 11 + static_cast<uint32_t>(dtype), 1.0f);
    std::vector<unsigned char> buf(n * element_size(t));
    if (t == DType::F16 || t == DType::BF16) {
      const auto lp = make_lp(masters, t, 5);
      std::memcpy(buf.data(), lp.data(), buf.size());
    } else if (t == DType::F32) {
      std::memcpy(buf.data(), masters.data(), buf.size());
    } else {
      std::vector<double> d(masters.begin(), masters.end());
      d[1] = 1e-310;  // f64 subnormal
      d[2] = 1e300;   // beyond float
      d[3] = -1e-320;
      std::memcpy(buf.data(), d.data(), buf.size());
    }
    const ValueStats want = ref_value_stats(buf.data(), t, n);
    const ValueStats got = make_cpu_backend(3)->value_stats(buf.data(), t, n);
    CKPTDOC_EXPECT_SAME(diff_values(got, want, kRel));
    CKPTDOC_EXPECT_SAME(
        diff_values(make_cpu_backend(3, CpuPath::Scalar)->value_stats(buf.data(), t, n), want, kRel));
    QVERIFY(got.nan > 0 && got.pos_inf > 0 && got.neg_inf > 0 && got.zeros > 0 && got.subnormals > 0);
    if (t != DType::F16)  // fp16 spans 2^-24..65504: inside the histogram's range
      QVERIFY(got.log_abs.underflow > 0 && got.log_abs.overflow > 0);
    QCOMPARE(got.log_abs.total(), got.count);
  }

  void divergence_matches_reference_data() {
    QTest::addColumn<int>("dtype");
    QTest::newRow("f16") << int(DType::F16);
    QTest::newRow("bf16") << int(DType::BF16);
    QTest::newRow("f32") << int(DType::F32);
  }
  void divergence_matches_reference() {
    QFETCH(int, dtype);
    const auto t = static_cast<DType>(dtype);
    const size_t n = 2'500'003;
    const auto masters = make_masters(n, 21 + static_cast<uint32_t>(dtype));
    std::vector<unsigned char> lp;
    if (t == DType::F32) {
      std::vector<float> l = masters;
      std::mt19937 rng(3);
      for (auto& x : l)
        if (rng() % 4 == 0)
          x = std::nextafter(x, rng() % 2 ? 1e30f : -1e30f) * (rng() % 50 == 0 ? 1.5f : 1.0f);
      lp.resize(n * 4);
      std::memcpy(lp.data(), l.data(), lp.size());
    } else {
      const auto l = make_lp(masters, t, 9);
      lp.resize(n * 2);
      std::memcpy(lp.data(), l.data(), lp.size());
    }
    const DivergenceStats want = ref_divergence(lp.data(), t, masters.data(), n);
    const DivergenceStats got = make_cpu_backend(3)->divergence(lp.data(), t, masters.data(), n);
    CKPTDOC_EXPECT_SAME(diff_divergence(got, want, kRel));
    CKPTDOC_EXPECT_SAME(diff_divergence(
        make_cpu_backend(3, CpuPath::Scalar)->divergence(lp.data(), t, masters.data(), n), want, kRel));
    QVERIFY(got.exact > n / 2 && got.exact < n);
    QVERIFY(got.nonfinite > 0);
    QVERIFY(got.ulp.counts[UlpHistogram::kBuckets - 1] > 0);
    QCOMPARE(got.log_abs_diff.total(), got.count);
  }

  void deterministic_across_thread_counts() {
    const size_t n = 5'300'001;
    const auto masters = make_masters(n, 99);
    const auto lp = make_lp(masters, DType::BF16, 98);
    for (CpuPath path : {CpuPath::Best, CpuPath::Scalar}) {
      const auto ref_d = make_cpu_backend(1, path)->divergence(lp.data(), DType::BF16, masters.data(), n);
      const auto ref_v = make_cpu_backend(1, path)->value_stats(masters.data(), DType::F32, n);
      for (unsigned threads : {2u, 3u, 8u, 0u}) {
        auto b = make_cpu_backend(threads, path);
        for (int again = 0; again < 2; ++again) {  // the second call reuses the backend's worker threads
          // counts identical; sums too, bit for bit, because chunks merge in order whatever the thread count
          CKPTDOC_EXPECT_SAME(
              diff_divergence(b->divergence(lp.data(), DType::BF16, masters.data(), n), ref_d, 0.0));
          CKPTDOC_EXPECT_SAME(diff_values(b->value_stats(masters.data(), DType::F32, n), ref_v, 0.0));
        }
      }
    }
  }

  // The AVX2 kernels against the portable scalar code on the same data: counts and histograms identical,
  // min/max bit for bit, sums within rounding. Lengths leave ragged tails for the scalar code to finish.
  void simd_matches_scalar_data() {
    QTest::addColumn<int>("dtype");
    QTest::newRow("f16") << int(DType::F16);
    QTest::newRow("bf16") << int(DType::BF16);
    QTest::newRow("f32") << int(DType::F32);
  }
  void simd_matches_scalar() {
    if (!cpu_simd_available()) QSKIP("no AVX2/F16C/FMA on this CPU");
    QFETCH(int, dtype);
    const auto t = static_cast<DType>(dtype);
    auto fast = make_cpu_backend(2), slow = make_cpu_backend(2, CpuPath::Scalar);
    QVERIFY(fast->description().find("AVX2") != std::string::npos);
    QVERIFY(slow->description().find("AVX2") == std::string::npos);

    // masters: every float the conversion tests stress (ties, format edges, NaN payloads, random bits)
    auto masters = conversion_inputs();
    masters.resize(masters.size() - masters.size() % 8 + 5);  // a ragged tail
    const size_t n = masters.size();
    std::vector<unsigned char> lp(n * element_size(t));
    std::mt19937 rng(17);
    if (t == DType::F32) {
      std::vector<float> l = masters;
      for (auto& x : l) {
        const uint32_t p = rng() % 16;
        if (p == 0)
          x = float_of(bits_of(x) ^ 1u);  // one ULP off (or a NaN payload change)
        else if (p == 1)
          x = float_of(static_cast<uint32_t>(rng()));
        else if (p == 2)
          x = -x;
      }
      std::memcpy(lp.data(), l.data(), lp.size());
    } else {
      std::vector<uint16_t> l(n);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h = t == DType::BF16 ? float_to_bf16(masters[i]) : float_to_half(masters[i]);
        const uint32_t p = rng() % 16;
        if (p == 0)
          h = static_cast<uint16_t>(h + static_cast<int>(rng() % 9) - 4);
        else if (p == 1)
          h = static_cast<uint16_t>(rng());
        else if (p == 2)
          h = static_cast<uint16_t>(h ^ 0x8000u);
        l[i] = h;
      }
      for (uint32_t h = 0; h < 0x10000 && h < n; ++h) l[h] = static_cast<uint16_t>(h);  // every lp pattern
      std::memcpy(lp.data(), l.data(), lp.size());
    }
    constexpr double kSumRel = kRel;  // different summation orders: fp16's wide range cancels to ~1e-11
    const auto df = fast->divergence(lp.data(), t, masters.data(), n);
    const auto ds = slow->divergence(lp.data(), t, masters.data(), n);
    CKPTDOC_EXPECT_SAME(diff_divergence(df, ds, kSumRel));
    QCOMPARE(bits_of(static_cast<float>(df.max_abs)), bits_of(static_cast<float>(ds.max_abs)));
    QVERIFY(df.exact > n / 2 && df.exact < n && df.nonfinite > 0);
    for (const void* data : {static_cast<const void*>(lp.data()), static_cast<const void*>(masters.data())}) {
      const DType dt = data == lp.data() ? t : DType::F32;
      const auto vf = fast->value_stats(data, dt, n), vs = slow->value_stats(data, dt, n);
      CKPTDOC_EXPECT_SAME(diff_values(vf, vs, kSumRel));
      QVERIFY(std::signbit(vf.min) == std::signbit(vs.min) && std::signbit(vf.max) == std::signbit(vs.max));
      QVERIFY(vf.nan > 0 && vf.pos_inf > 0 && vf.neg_inf > 0 && vf.zeros > 0 && vf.subnormals > 0);
    }
    // and on every length from 0 to 40 (tails only, kernel and tail, several kernel steps)
    for (size_t len = 0; len <= 40; ++len) {
      const size_t off = 65536 + 3 * len;
      const unsigned char* l = lp.data() + off * element_size(t);
      CKPTDOC_EXPECT_SAME(diff_divergence(fast->divergence(l, t, masters.data() + off, len),
                                          slow->divergence(l, t, masters.data() + off, len), kSumRel));
      CKPTDOC_EXPECT_SAME(diff_values(fast->value_stats(l, t, len), slow->value_stats(l, t, len), kSumRel));
    }
  }

  // The AVX2 kernels keep their histograms per thread between calls and clear only the bins a call touched:
  // calls on one thread whose values fill different binades (every float; then one binade; zeros only; large
  // negatives; NaN and Inf only) each give what the scalar code gives, so nothing one call counted is left
  // for the next.
  void simd_calls_on_one_thread_leave_nothing_behind() {
    if (!cpu_simd_available()) QSKIP("no AVX2/F16C/FMA on this CPU");
    auto fast = make_cpu_backend(1), slow = make_cpu_backend(1, CpuPath::Scalar);
    std::vector<std::vector<float>> cases;
    cases.push_back(random_f32_bits(4099, 5));  // every exponent, NaN, Inf, subnormals, both signs
    cases.emplace_back(1003, 1.25f);            // one binade
    cases.emplace_back(64, 0.0f);               // zeros only: the group every finish visits
    cases.push_back(std::vector<float>(517, -3.0e4f));
    cases.push_back({std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                     -std::numeric_limits<float>::infinity(), 1e-40f, -0.0f, 2.0f, 7.0f, -1e30f, 3.0f});
    cases.push_back(random_f32_bits(2051, 6));
    for (int round = 0; round < 2; ++round) {
      for (const auto& m : cases) {
        const size_t n = m.size();
        for (DType t : {DType::F16, DType::BF16, DType::F32}) {
          const auto lp = make_lp_bytes(m, t, 7);
          CKPTDOC_EXPECT_SAME(
              diff_values(fast->value_stats(lp.data(), t, n), slow->value_stats(lp.data(), t, n), kRel));
          CKPTDOC_EXPECT_SAME(diff_divergence(fast->divergence(lp.data(), t, m.data(), n),
                                              slow->divergence(lp.data(), t, m.data(), n), kRel));
          const auto ff = fast->fragment_stats(lp.data(), t, m.data(), n);
          const auto fs = slow->fragment_stats(lp.data(), t, m.data(), n);
          CKPTDOC_EXPECT_SAME(diff_divergence(ff.divergence, fs.divergence, kRel));
          CKPTDOC_EXPECT_SAME(diff_values(ff.lp, fs.lp, kRel));
          CKPTDOC_EXPECT_SAME(diff_values(ff.fp32, fs.fp32, kRel));
        }
      }
    }
  }

  // A zero minimum or maximum keeps the sign of the first zero in the data, as a sequential scan finds it,
  // however the zeros fall across vector lanes.
  void simd_zero_extremes_keep_first_sign() {
    for (CpuPath path : {CpuPath::Best, CpuPath::Scalar}) {
      auto cpu = make_cpu_backend(1, path);
      for (size_t first = 0; first < 20; ++first) {
        for (bool negative_first : {true, false}) {
          std::vector<float> up(37, 1.5f), down(37, -1.5f);
          for (size_t i = first; i < up.size(); i += 7) {
            const float z = ((i == first) == negative_first) ? -0.0f : 0.0f;
            up[i] = z;
            down[i] = z;
          }
          const auto u = cpu->value_stats(up.data(), DType::F32, up.size());
          const auto d = cpu->value_stats(down.data(), DType::F32, down.size());
          QCOMPARE(u.min, 0.0);
          QCOMPARE(std::signbit(u.min), negative_first);
          QCOMPARE(d.max, 0.0);
          QCOMPARE(std::signbit(d.max), negative_first);
        }
      }
    }
  }

  // fragment_stats gives exactly what the three separate calls give, on both paths.
  void fragment_stats_matches_three_calls_data() { divergence_matches_reference_data(); }
  void fragment_stats_matches_three_calls() {
    QFETCH(int, dtype);
    const auto t = static_cast<DType>(dtype);
    const size_t n = 2'100'005;
    const auto masters = make_masters(n, 31 + static_cast<uint32_t>(dtype));
    std::vector<unsigned char> lp(n * element_size(t));
    if (t == DType::F32) {
      std::memcpy(lp.data(), masters.data(), lp.size());
    } else {
      const auto l = make_lp(masters, t, 32);
      std::memcpy(lp.data(), l.data(), lp.size());
    }
    for (CpuPath path : {CpuPath::Best, CpuPath::Scalar}) {
      for (unsigned threads : {1u, 3u}) {
        auto cpu = make_cpu_backend(threads, path);
        const FragmentStats f = cpu->fragment_stats(lp.data(), t, masters.data(), n);
        CKPTDOC_EXPECT_SAME(
            diff_divergence(f.divergence, cpu->divergence(lp.data(), t, masters.data(), n), 0.0));
        CKPTDOC_EXPECT_SAME(diff_values(f.lp, cpu->value_stats(lp.data(), t, n), 0.0));
        CKPTDOC_EXPECT_SAME(diff_values(f.fp32, cpu->value_stats(masters.data(), DType::F32, n), 0.0));
        CKPTDOC_EXPECT_SAME(
            diff_divergence(f.divergence, ref_divergence(lp.data(), t, masters.data(), n), kRel));
        CKPTDOC_EXPECT_SAME(diff_values(f.lp, ref_value_stats(lp.data(), t, n), kRel));
      }
    }
    auto cpu = make_cpu_backend(2);
    QVERIFY_THROWS_EXCEPTION(Error, cpu->fragment_stats(lp.data(), DType::F64, masters.data(), 1));
  }

  // The fused pass takes the divergence's sums of squares from both sides' value statistics in a chunk where
  // no element is NaN/Inf on one side only, and computes them apart in a chunk where one is (the value
  // statistics keep that element's other side): either way they are what divergence() gives, bit for bit.
  void fragment_stats_one_side_nonfinite_data() { divergence_matches_reference_data(); }
  void fragment_stats_one_side_nonfinite() {
    QFETCH(int, dtype);
    const auto t = static_cast<DType>(dtype);
    const size_t n = (size_t{3} << 20) + 13;  // three of the backend's 1M-element chunks and a ragged tail
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> masters(n);
    for (auto& x : masters) x = normal(rng);
    std::vector<unsigned char> lp(n * element_size(t));
    auto put = [&](size_t i, float v) {
      if (t == DType::F32) {
        std::memcpy(lp.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = t == DType::BF16 ? float_to_bf16(v) : float_to_half(v);
        std::memcpy(lp.data() + 2 * i, &h, 2);
      }
    };
    for (size_t i = 0; i < n; ++i) put(i, i % 3 == 0 ? masters[i] * 1.001f : masters[i]);
    masters[(size_t{1} << 20) + 77] = std::numeric_limits<float>::quiet_NaN();  // second chunk: master only
    put((size_t{2} << 20) + 5, -std::numeric_limits<float>::infinity());        // third chunk: lp only
    for (CpuPath path : {CpuPath::Best, CpuPath::Scalar}) {
      auto cpu = make_cpu_backend(2, path);
      const FragmentStats f = cpu->fragment_stats(lp.data(), t, masters.data(), n);
      const auto d = cpu->divergence(lp.data(), t, masters.data(), n);
      CKPTDOC_EXPECT_SAME(diff_divergence(f.divergence, d, 0.0));
      QVERIFY(f.divergence.sum_sq_lp == d.sum_sq_lp);  // exactly, not QCOMPARE's fuzzy double compare
      QVERIFY(f.divergence.sum_sq_fp32 == d.sum_sq_fp32);
      QCOMPARE(f.divergence.nonfinite, uint64_t{2});
      CKPTDOC_EXPECT_SAME(diff_values(f.lp, cpu->value_stats(lp.data(), t, n), 0.0));
      CKPTDOC_EXPECT_SAME(diff_values(f.fp32, cpu->value_stats(masters.data(), DType::F32, n), 0.0));
    }
  }

  void empty_and_tiny_inputs() {
    auto cpu = make_cpu_backend(4);
    const auto v = cpu->value_stats(nullptr, DType::F32, 0);
    QCOMPARE(v.count, uint64_t{0});
    QCOMPARE(v.mean(), 0.0);
    const auto d = cpu->divergence(nullptr, DType::F16, nullptr, 0);
    QCOMPARE(d.count, uint64_t{0});
    QCOMPARE(d.rel_l2(), 0.0);
    const float one = 1.0f;
    const uint16_t h = float_to_half(1.0f);
    const auto d1 = cpu->divergence(&h, DType::F16, &one, 1);
    QCOMPARE(d1.exact, uint64_t{1});
    QCOMPARE(d1.log_abs_diff.zeros, uint64_t{1});
    QVERIFY_THROWS_EXCEPTION(Error, cpu->value_stats(&h, DType::I32, 1));
    QVERIFY_THROWS_EXCEPTION(Error, cpu->divergence(&h, DType::F64, &one, 1));
    QVERIFY(cpu->description().find("4 threads") != std::string::npos);
  }

  void backend_selection() {
    QVERIFY(parse_device("auto") == DeviceKind::Auto);
    QVERIFY(parse_device("cpu") == DeviceKind::Cpu);
    QVERIFY(parse_device("cuda") == DeviceKind::Cuda);
    QVERIFY_THROWS_EXCEPTION(Error, parse_device("gpu"));
    QCOMPARE(device_name(DeviceKind::Cuda), std::string("cuda"));
    QVERIFY(make_backend(DeviceKind::Cpu)->kind() == DeviceKind::Cpu);
    std::string reason;
    if (!cuda_available(&reason)) {
      QVERIFY(!reason.empty());
      std::string note;
      auto b = make_backend(DeviceKind::Auto, &note);
      QVERIFY(b->kind() == DeviceKind::Cpu);
      QCOMPARE(note, "no CUDA device: " + reason + "; using CPU");
      QVERIFY_THROWS_EXCEPTION(Error, make_backend(DeviceKind::Cuda));
      qInfo("no CUDA: %s", reason.c_str());
    } else {
      QVERIFY(make_backend(DeviceKind::Auto)->kind() == DeviceKind::Cuda);
    }
  }

  void single_process_distribution() {
    if (mpi_active()) QSKIP("MPI initialised by the launcher");
    QCOMPARE(mpi_rank(), 0);
    QCOMPARE(mpi_size(), 1);
    QCOMPARE(mpi_local_rank(), 0);
    QCOMPARE(mpi_local_size(), 1);
    const auto reducer = make_reducer(DeviceKind::Cuda, 0);  // one process: never NCCL
    QCOMPARE(reducer->name(), std::string("single process"));
    ReductionArrays a;
    a.counts = {3, 4};
    a.sums = {1.5};
    reducer->allreduce(a);
    QCOMPARE(a.counts, (std::vector<uint64_t>{3, 4}));
    QCOMPARE(a.sums, std::vector<double>{1.5});
  }

  // What the packed all-reduce relies on: unpack(pack(x)) == x, and element-wise sums/min/max of two packed
  // parts unpack to what merge() gives.
  void packed_statistics_merge_like_merge() {
    const auto m1 = make_masters(100'003, 5), m2 = make_masters(77'777, 6);
    auto cpu = make_cpu_backend(1);
    std::vector<float> empty_nan(3, std::numeric_limits<float>::quiet_NaN());
    const ValueStats parts[] = {cpu->value_stats(m1.data(), DType::F32, m1.size()),
                                cpu->value_stats(m2.data(), DType::F32, m2.size()),
                                cpu->value_stats(empty_nan.data(), DType::F32, empty_nan.size()),
                                ValueStats{}};
    const auto l1 = make_lp(m1, DType::BF16, 3);
    const DivergenceStats d1 = cpu->divergence(l1.data(), DType::BF16, m1.data(), m1.size());
    for (const auto& x : parts) {
      ReductionArrays a;
      pack(x, a);
      pack(d1, a);
      UnpackCursor c;
      ValueStats back;
      DivergenceStats dback;
      unpack(a, c, back);
      unpack(a, c, dback);
      CKPTDOC_EXPECT_SAME(diff_values(back, x, 0));
      CKPTDOC_EXPECT_SAME(diff_divergence(dback, d1, 0));
      QCOMPARE(c.counts, a.counts.size());
      QVERIFY_THROWS_EXCEPTION(Error, unpack(a, c, back));  // past the end
    }
    for (const auto& x : parts)
      for (const auto& y : parts) {
        ReductionArrays a, b;
        pack(x, a);
        pack(y, b);
        for (size_t i = 0; i < a.counts.size(); ++i) a.counts[i] += b.counts[i];
        for (size_t i = 0; i < a.sums.size(); ++i) a.sums[i] += b.sums[i];
        for (size_t i = 0; i < a.mins.size(); ++i) a.mins[i] = std::min(a.mins[i], b.mins[i]);
        for (size_t i = 0; i < a.maxs.size(); ++i) a.maxs[i] = std::max(a.maxs[i], b.maxs[i]);
        UnpackCursor c;
        ValueStats reduced;
        unpack(a, c, reduced);
        ValueStats merged = x;
        merged.merge(y);
        CKPTDOC_EXPECT_SAME(diff_values(reduced, merged, 1e-15));
      }
  }

  void devices_for_processes() {
    QCOMPARE(devices_for_process(0, 1, 0), std::vector<int>{});
    QCOMPARE(devices_for_process(0, 1, 4), (std::vector<int>{0, 1, 2, 3}));  // one process drives all
    QCOMPARE(devices_for_process(1, 2, 4), (std::vector<int>{1, 3}));
    for (int r = 0; r < 8; ++r) QCOMPARE(devices_for_process(r, 8, 8), std::vector<int>{r});  // one per GPU
    QCOMPARE(devices_for_process(5, 8, 4), std::vector<int>{1});  // oversubscribed: shared
    // every GPU is driven by someone, and by one process only when there are no more processes than GPUs
    for (int size = 1; size <= 9; ++size) {
      std::map<int, int> drivers;
      for (int r = 0; r < size; ++r)
        for (int d : devices_for_process(r, size, 6)) ++drivers[d];
      QCOMPARE(static_cast<int>(drivers.size()), 6);
      if (size <= 6)
        for (const auto& [d, n] : drivers) QCOMPARE(n, 1);
    }
  }

  void rank_placement_balances_bytes() {
    QVERIFY_THROWS_EXCEPTION(ckptdoc::Error, place_ranks({{0, 1}}, 0));
    QCOMPARE(place_ranks({}, 3), (std::map<int, int>{}));
    // 7 ranks of 10, 9, ..., 4 bytes over 3 devices (total 49, so no device can get less than 17)
    std::map<int, uint64_t> bytes;
    for (int r = 0; r < 7; ++r) bytes[r] = static_cast<uint64_t>(10 - r);
    const auto slot = place_ranks(bytes, 3);
    QCOMPARE(slot.size(), size_t{7});
    std::vector<uint64_t> load(3, 0);
    for (const auto& [r, d] : slot) {
      QVERIFY(d >= 0 && d < 3);
      load[static_cast<size_t>(d)] += bytes[r];
    }
    // longest-first's bounds: within 4/3 of the best makespan, and no two loads further apart than the
    // largest rank (else that rank would have gone to the lighter device)
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    QVERIFY2(3 * *hi <= 4 * 17, qPrintable(QString::number(*hi)));
    QVERIFY(*hi - *lo <= 10);
    QCOMPARE(place_ranks(bytes, 3), slot);  // depends only on the sizes
    // more devices than ranks: each rank alone
    const auto wide = place_ranks(bytes, 16);
    std::set<int> used;
    for (const auto& [r, d] : wide) used.insert(d);
    QCOMPARE(used.size(), size_t{7});
  }
};

CKPTDOC_TEST_MAIN(TestComputeCpu)
#include "test_compute_cpu.moc"
