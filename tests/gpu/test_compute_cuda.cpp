// The CUDA backend against the CPU backend on the same random and edge data: histogram counts and
// conversions exact, sums within 1e-9 relative. Skips (with the CUDA runtime's reason) without a device.
#include <QTest>
#include <cmath>
#include <cstring>
#include <random>

#include "ckptdoc/compute/backend.h"
#include "compute_compare.h"
#include "compute_reference.h"

using namespace ckptdoc;
using namespace ckptdoc::test;

class TestComputeCuda : public QObject {
  Q_OBJECT

  std::unique_ptr<Backend> gpu_, cpu_;

 private slots:
  void initTestCase() {
    std::string reason;
    if (!cuda_available(&reason)) QSKIP(qPrintable(QString::fromStdString("no CUDA device: " + reason)));
    gpu_ = make_backend(DeviceKind::Cuda);
    cpu_ = make_cpu_backend();
    qInfo("%s vs %s", gpu_->description().c_str(), cpu_->description().c_str());
  }

  void divergence_matches_cpu_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<qulonglong>("n");
    for (auto [t, name] : {std::pair{DType::F16, "f16"}, {DType::BF16, "bf16"}, {DType::F32, "f32"}})
      for (qulonglong n : {0ull, 1ull, 7ull, 1000ull, 4'194'311ull, 9'000'001ull})
        QTest::newRow(qPrintable(QString("%1/%2").arg(name).arg(n))) << int(t) << n;
  }
  void divergence_matches_cpu() {
    QFETCH(int, dtype);
    QFETCH(qulonglong, n);
    const auto t = static_cast<DType>(dtype);
    const auto m = make_masters(n, 31 + static_cast<uint32_t>(n));
    std::vector<unsigned char> lp;
    if (t == DType::F32) {
      std::vector<float> l = m;
      for (size_t i = 0; i < l.size(); i += 3) l[i] = std::nextafter(l[i], 1e30f);
      lp.resize(n * 4);
      if (n) std::memcpy(lp.data(), l.data(), lp.size());
    } else {
      const auto l = make_lp(m, t, 17);
      lp.resize(n * 2);
      if (n) std::memcpy(lp.data(), l.data(), lp.size());
    }
    const auto g = gpu_->divergence(lp.data(), t, m.data(), n);
    const auto c = cpu_->divergence(lp.data(), t, m.data(), n);
    CKPTDOC_EXPECT_SAME(diff_divergence(g, c, 1e-9));
  }

  void value_stats_match_cpu_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<qulonglong>("n");
    for (auto [t, name] : {std::pair{DType::F16, "f16"}, {DType::BF16, "bf16"}, {DType::F32, "f32"},
                           {DType::F64, "f64"}})
      for (qulonglong n : {0ull, 3ull, 4'194'304ull, 6'000'013ull})
        QTest::newRow(qPrintable(QString("%1/%2").arg(name).arg(n))) << int(t) << n;
  }
  void value_stats_match_cpu() {
    QFETCH(int, dtype);
    QFETCH(qulonglong, n);
    const auto t = static_cast<DType>(dtype);
    const auto m = make_masters(n, 41 + static_cast<uint32_t>(n), 1.0f);
    std::vector<unsigned char> buf(n * element_size(t));
    if (t == DType::F16 || t == DType::BF16) {
      const auto l = make_lp(m, t, 3);
      if (n) std::memcpy(buf.data(), l.data(), buf.size());
    } else if (t == DType::F32) {
      if (n) std::memcpy(buf.data(), m.data(), buf.size());
    } else {
      std::vector<double> d(m.begin(), m.end());
      if (n > 2) {
        d[0] = 1e-310;
        d[1] = -1e300;
      }
      if (n) std::memcpy(buf.data(), d.data(), buf.size());
    }
    const auto g = gpu_->value_stats(buf.data(), t, n);
    const auto c = cpu_->value_stats(buf.data(), t, n);
    CKPTDOC_EXPECT_SAME(diff_values(g, c, 1e-9));
  }

  void conversions_bit_exact() {
    std::vector<uint16_t> all(0x10000 * 3 + 5);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u);
    for (DType t : {DType::F16, DType::BF16}) {
      std::vector<float> g(all.size()), c(all.size());
      gpu_->upcast(all.data(), t, g.data(), all.size());
      cpu_->upcast(all.data(), t, c.data(), all.size());
      QVERIFY(std::memcmp(g.data(), c.data(), g.size() * 4) == 0);
    }
    std::mt19937 rng(5);
    std::vector<float> in(9'000'003);
    for (auto& x : in) {
      const uint32_t u = static_cast<uint32_t>(rng());
      std::memcpy(&x, &u, 4);
    }
    for (size_t i = 0; i + 1 < in.size(); i += 1001) {  // fp16 ties
      const float a = half_to_float(static_cast<uint16_t>(i & 0x7bff)), b = half_to_float(static_cast<uint16_t>((i & 0x7bff) + 1));
      in[i] = static_cast<float>((static_cast<double>(a) + b) / 2);
    }
    for (DType t : {DType::F16, DType::BF16}) {
      std::vector<uint16_t> g(in.size()), c(in.size());
      gpu_->downcast(in.data(), t, g.data(), in.size());
      cpu_->downcast(in.data(), t, c.data(), in.size());
      QVERIFY(std::memcmp(g.data(), c.data(), g.size() * 2) == 0);
    }
  }
};

QTEST_GUILESS_MAIN(TestComputeCuda)
#include "test_compute_cuda.moc"
