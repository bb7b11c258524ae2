// density_2d, the 2-D histogram behind the weight-vs-master density plot: every finite pair counted once in
// the bin its values fall in, on one range shared by both axes.
#include <QTest>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include "ckptdoc/analysis/density.h"
#include "ckptdoc/error.h"

using namespace ckptdoc;
using analysis::density_2d;

class TestDensity : public QObject {
  Q_OBJECT

 private slots:
  void countsEveryFinitePairInItsBin() {
    // range [-1, 3] over 4 bins: bin width 1, edges -1, 0, 1, 2, 3
    const std::vector<float> x{-1.0f, 0.5f, 2.999f, 3.0f, 0.0f, 1.5f};
    const std::vector<float> y{-1.0f, 0.5f, -0.5f, 3.0f, 2.0f, 1.5f};
    const auto d = density_2d(x, y, 4);
    QCOMPARE(d.lo, -1.0);
    QCOMPARE(d.hi, 3.0);
    QCOMPARE(d.pairs, uint64_t{6});
    QCOMPARE(d.nonfinite, uint64_t{0});
    QCOMPARE(d.at(0, 0), uint64_t{1});  // (-1, -1): the low edge is in the first bin
    QCOMPARE(d.at(1, 1), uint64_t{1});  // (0.5, 0.5)
    QCOMPARE(d.at(3, 0), uint64_t{1});  // (2.999, -0.5)
    QCOMPARE(d.at(3, 3), uint64_t{1});  // (3, 3): the high edge is in the last bin
    QCOMPARE(d.at(1, 3), uint64_t{1});  // (0, 2)
    QCOMPARE(d.at(2, 2), uint64_t{1});  // (1.5, 1.5)
    QCOMPARE(std::accumulate(d.counts.begin(), d.counts.end(), uint64_t{0}), uint64_t{6});
    QCOMPARE(d.max_count, uint64_t{1});
    QCOMPARE(d.center(0), -0.5);
    QCOMPARE(d.center(3), 2.5);
  }

  void leavesOutNonFinitePairsAndPairsUpToTheShorterSide() {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<float> x{1, nan, 2, -inf, 5, 100};
    const std::vector<float> y{1, 0, inf, 0, 5};
    const auto d = density_2d(x, y, 8);
    QCOMPARE(d.pairs, uint64_t{2});
    QCOMPARE(d.nonfinite, uint64_t{3});
    QCOMPARE(d.lo, 1.0);  // 100 has no partner, NaN/Inf pairs do not widen the range
    QCOMPARE(d.hi, 5.0);
  }

  void equalValuesAndEmptyInput() {
    const std::vector<float> same(10, 0.25f);
    const auto d = density_2d(same, same, 5);
    QCOMPARE(d.lo, -0.75);
    QCOMPARE(d.hi, 1.25);
    QCOMPARE(d.at(2, 2), uint64_t{10});
    const auto e = density_2d({}, {}, 5);
    QCOMPARE(e.pairs, uint64_t{0});
    QCOMPARE(e.counts.size(), size_t{25});
    QVERIFY_THROWS_EXCEPTION(ckptdoc::Error, density_2d(same, same, 0));
  }

  // bf16 weights rounded from their masters sit on the diagonal bins; unrelated masters spread off it.
  void roundedWeightsStayOnTheDiagonal() {
    std::mt19937 gen(3);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> master(100000), weight(100000), stale(100000);
    for (size_t i = 0; i < master.size(); ++i) {
      master[i] = dist(gen);
      uint32_t b;
      std::memcpy(&b, &master[i], 4);
      b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;  // round to bf16
      std::memcpy(&weight[i], &b, 4);
      stale[i] = dist(gen);
    }
    auto off_diagonal = [](const analysis::Density2D& d) {
      uint64_t off = 0;
      for (int iy = 0; iy < d.bins; ++iy)
        for (int ix = 0; ix < d.bins; ++ix)
          if (std::abs(ix - iy) > 1) off += d.at(ix, iy);
      return off;
    };
    QCOMPARE(off_diagonal(density_2d(weight, master, 80)), uint64_t{0});
    QVERIFY(off_diagonal(density_2d(weight, stale, 80)) > 50000);
  }
};

QTEST_APPLESS_MAIN(TestDensity)
#include "test_density.moc"
