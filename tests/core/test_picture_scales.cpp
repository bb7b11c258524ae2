// What the pictures open on and how their scales read, shared by both views: the shade that shows the worst
// finding (errors before warnings, info never), the legend naming it, the elements-off-per-rank log scale and
// the ULP axis labels (bucket k holds distances from 2^(k-1) ULPs).
#include <QTest>

#include "ckptdoc/session/off_scale.h"
#include "ckptdoc/session/shade_legend.h"
#include "ckptdoc/session/ulp_label.h"
#include "test_support.h"

using namespace ckptdoc;
using analysis::Finding;
using analysis::Severity;
using session::Shade;

namespace {

Finding finding(const std::string& code, Severity severity) {
  Finding f;
  f.code = code;
  f.severity = severity;
  return f;
}

DivergenceStats stats(uint64_t count, uint64_t exact) {
  DivergenceStats d;
  d.count = count;
  d.exact = exact;
  return d;
}

}  // namespace

class TestPictureScales : public QObject {
  Q_OBJECT
 private slots:
  void cleanOrUnshowableFindingsKeepParam() {
    QCOMPARE(session::shade_for({}), Shade::Param);
    QCOMPARE(session::shade_for({finding("optimizer-state-fresh", Severity::Info)}), Shade::Param);
    QCOMPARE(session::shade_for({finding("world-size-mismatch", Severity::Error)}), Shade::Param);
  }

  void worstShowableFindingWins() {
    QCOMPARE(session::shade_for({finding("fp32-master-mismatch", Severity::Error)}), Shade::ExactFraction);
    QCOMPARE(session::shade_for({finding("new-params-zero-moments", Severity::Warning)}),
             Shade::MomentMagnitude);
    QCOMPARE(session::shade_for({finding("optimizer-state-incomplete", Severity::Error)}),
             Shade::MomentMagnitude);
    // An error outranks a warning listed before it; among errors the first listed wins.
    QCOMPARE(session::shade_for({finding("fp32-master-drift", Severity::Warning),
                                 finding("nonfinite-values", Severity::Error)}),
             Shade::NonFinite);
    QCOMPARE(session::shade_for({finding("world-size-mismatch", Severity::Error),
                                 finding("optimizer-step-inconsistent", Severity::Error),
                                 finding("fp32-master-mismatch", Severity::Error)}),
             Shade::MomentMagnitude);
  }

  void legendNamesTheMetric() {
    QVERIFY(session::shade_legend(Shade::ExactFraction, nullptr).title.starts_with("Exact fraction"));
    QVERIFY(session::shade_legend(Shade::NonFinite, nullptr).title.starts_with("NaN/Inf"));
    QVERIFY(session::shade_legend(Shade::MomentMagnitude, nullptr).title.starts_with("Moment magnitude"));
    QVERIFY(session::shade_legend(Shade::Param, nullptr).title.starts_with("Param"));
    QVERIFY(!session::shade_legend(Shade::ExactFraction, nullptr).entries.empty());
  }

  void offScaleShowsSmallSharesAndNothingForHealthyRanks() {
    const std::map<int, DivergenceStats> per = {{0, stats(100000, 100000)},  // healthy
                                                {1, stats(100000, 99987)},   // 0.013 % off
                                                {2, stats(100000, 13)}};     // 0.013 % exact
    const auto s = session::OffScale::fit(per);
    QCOMPARE(s.low_decade, -5);  // one decade below 1.3e-4
    QCOMPARE(s.height(session::off_fraction(per.at(0))), 0.0);
    QVERIFY(s.height(session::off_fraction(per.at(1))) / s.top() > 0.1);
    QVERIFY(s.height(session::off_fraction(per.at(2))) / s.top() > 0.99);
    const auto ticks = s.ticks();
    QCOMPARE(ticks.front().second, std::string("0.001%"));
    QCOMPARE(ticks.back().second, std::string("100%"));
    QCOMPARE(ticks.back().first, s.top());
  }

  void ulpLabelsAreUlpsNotBucketIndices() {
    QCOMPARE(session::ulp_axis_label(0), std::string("0"));
    QCOMPARE(session::ulp_axis_label(1), std::string("1"));
    QCOMPARE(session::ulp_axis_label(3), std::string("4"));
    QCOMPARE(session::ulp_axis_label(15), std::string("16k"));
    QCOMPARE(session::ulp_axis_label(UlpHistogram::kBuckets - 1), std::string("\u226564k"));
  }
};

CKPTDOC_TEST_MAIN(TestPictureScales)
#include "test_picture_scales.moc"
