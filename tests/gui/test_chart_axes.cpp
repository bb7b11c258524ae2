// The element-count axes of the histogram charts: for any count, from one differing element (the usual case
// in the Diff view) to millions, the ticks are whole numbers, the top tick is at or above the tallest bar,
// and no two tick labels read the same. The elements-off-per-rank bars: a rank 0.013 % off and one 0.013 %
// exact are both bars a user can see, a healthy rank none.
#include <QBarSeries>
#include <QBarSet>
#include <QCategoryAxis>
#include <QValueAxis>
#include <QtTest>
#include <map>
#include <memory>
#include <set>

#include "chart_builder.h"
#include "gui_test_main.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

// The tick values of a value axis, as Qt places them for either tick type.
std::vector<double> ticks(const QValueAxis& a) {
  std::vector<double> t;
  if (a.tickType() == QValueAxis::TicksDynamic) {
    const double step = a.tickInterval();
    for (double v = a.tickAnchor() + std::ceil((a.min() - a.tickAnchor()) / step) * step;
         v <= a.max() + step * 1e-9; v += step)
      t.push_back(v);
  } else {
    for (int i = 0; i < a.tickCount(); ++i)
      t.push_back(a.min() + (a.max() - a.min()) * i / (a.tickCount() - 1));
  }
  return t;
}

QString label(const QValueAxis& a, double v) {
  return QString::asprintf(a.labelFormat().toUtf8().constData(), v);
}

// Checks the count axis of a chart whose tallest bar holds `tallest` elements.
void checkCountAxis(QChart* chart, double tallest) {
  std::unique_ptr<QChart> owned(chart);
  const auto vertical = chart->axes(Qt::Vertical);
  QCOMPARE(vertical.size(), 1);
  const auto* y = qobject_cast<QValueAxis*>(vertical.front());
  QVERIFY(y);
  QVERIFY2(y->max() >= tallest,
           qPrintable(QStringLiteral("axis ends at %1 below %2").arg(y->max()).arg(tallest)));
  const auto t = ticks(*y);
  QVERIFY2(t.size() >= 2 && t.size() <= 12, qPrintable(QStringLiteral("%1 ticks").arg(t.size())));
  std::set<QString> seen;
  for (double v : t) {
    QVERIFY2(v == std::floor(v), qPrintable(QStringLiteral("tick at %1 is not a whole count").arg(v)));
    const QString text = label(*y, v);
    QVERIFY2(seen.insert(text).second,
             qPrintable(QStringLiteral("label '%1' repeats (count %2)").arg(text).arg(tallest)));
  }
}

}  // namespace

class TestChartAxes : public QObject {
  Q_OBJECT

 private slots:
  void countAxis_data() {
    QTest::addColumn<double>("count");
    for (double n : {1.0, 2.0, 3.0, 7.0, 12.0, 99.0, 120.0, 1001.0, 99999.0, 123456.0, 4.2e6, 9.9e9})
      QTest::newRow(QByteArray::number(n, 'g', 12).constData()) << n;
  }

  void countAxis() {
    QFETCH(double, count);
    LogHistogram h;
    h.counts.set(100, static_cast<uint64_t>(count));
    h.counts.set(101, static_cast<uint64_t>(count / 2));
    checkCountAxis(logHistogramChart(QStringLiteral("|A − B|"), QStringLiteral("log10 |A − B|"), h), count);
    UlpHistogram u;
    u.counts.set(0, static_cast<uint64_t>(count));
    u.counts.set(3, 1);
    checkCountAxis(ulpChart(QStringLiteral("ulp"), u), count);
  }

  // The timeline's NaN/Inf counts were labelled 1.0, 2.0 … and its exact-fraction axis ran to 150 %.
  void timelineCountsAreWholeAndSharesEndAt100() {
    for (double n : {0.0, 1.0, 2.0, 7.0, 1001.0}) {
      StepSeries s{QStringLiteral("nan"), {{5, n}, {10, n / 2}, {15, 0}}};
      checkCountAxis(stepChart(QStringLiteral("NaN/Inf"), QStringLiteral("elements"), {s}, StepScale::Count),
                     n);
    }
    for (double share : {100.0, 99.987, 42.0}) {
      std::unique_ptr<QChart> c(stepChart(QStringLiteral("exact"), QStringLiteral("% of elements"),
                                          {StepSeries{QStringLiteral("exact"), {{5, share}, {10, 100.0}}}},
                                          StepScale::Percent));
      const auto* y = qobject_cast<QValueAxis*>(c->axes(Qt::Vertical).front());
      QVERIFY(y);
      QCOMPARE(y->max(), 100.0);
      QVERIFY2(y->min() >= 0 && y->min() < share, qPrintable(QStringLiteral("axis from %1").arg(y->min())));
    }
  }

  // The density plot had ticks at -0.001, 0.044 and no colour bar: round ticks, the same on both axes, and a
  // legend naming the elements per bin of every shade, up to the fullest bin.
  void densityHasRoundTicksAndAColourBar() {
    analysis::Density2D d;
    d.bins = 4;
    d.lo = -0.0013;
    d.hi = 0.0431;
    d.counts.assign(16, 0);
    d.counts[0] = 1;
    d.counts[5] = 40;
    d.counts[10] = 1000;
    d.max_count = 1000;
    d.pairs = 1041;
    std::unique_ptr<QChart> c(densityChart(QStringLiteral("density"), d));
    const auto* x = qobject_cast<QValueAxis*>(c->axes(Qt::Horizontal).front());
    const auto* y = qobject_cast<QValueAxis*>(c->axes(Qt::Vertical).front());
    QVERIFY(x && y);
    QCOMPARE(y->min(), x->min());
    QCOMPARE(y->max(), x->max());
    for (double v : ticks(*x)) {
      const double step = (x->max() - x->min()) / (x->tickCount() - 1);
      QVERIFY2(std::abs(v / step - std::round(v / step)) < 1e-6, qPrintable(QString::number(v)));
    }
    QVERIFY(c->legend()->isVisible());
    QStringList names;
    for (auto* s : c->series()) names << s->name();
    QVERIFY2(names.contains(QStringLiteral("y = x")), qPrintable(names.join(", ")));
    QVERIFY2(names.contains(QStringLiteral("≤1000")),
             qPrintable(names.join(", ")));  // the fullest bin's shade
    QVERIFY2(c->title().contains(QStringLiteral("elements per bin")), qPrintable(c->title()));
  }

  void rankOffBarsShowSmallShares() {
    std::map<int, DivergenceStats> per;
    auto rank = [&](int r, uint64_t count, uint64_t exact) {
      per[r].count = count;
      per[r].exact = exact;
    };
    rank(0, 100000, 100000);  // healthy
    rank(1, 100000, 99987);   // 0.013 % off
    rank(2, 100000, 13);      // 0.013 % exact: the demo's stale masters
    std::unique_ptr<QChart> chart(rankOffChart(QStringLiteral("ranks"), per));
    auto* y = qobject_cast<QCategoryAxis*>(chart->axes(Qt::Vertical).value(0));
    QVERIFY(y);
    QVERIFY2(y->categoriesLabels().contains(QStringLiteral("0.01%")),
             qPrintable(y->categoriesLabels().join(' ')));
    QCOMPARE(y->categoriesLabels().last(), QStringLiteral("100%"));
    auto* bars = qobject_cast<QBarSeries*>(chart->series().value(0));
    QVERIFY(bars && bars->count() == 1);
    const QBarSet* set = bars->barSets().front();
    const double range = y->max() - y->min();
    QCOMPARE(set->at(0), 0.0);
    QVERIFY2(set->at(1) / range > 0.1, qPrintable(QString::number(set->at(1) / range)));
    QVERIFY2(set->at(2) / range > 0.95, qPrintable(QString::number(set->at(2) / range)));
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestChartAxes)
#include "test_chart_axes.moc"
