#include "chart_builder.h"

#include <QAreaSeries>
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QCategoryAxis>
#include <QCursor>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QToolTip>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>

#include "ckptdoc/session/off_scale.h"
#include "ckptdoc/session/ulp_label.h"

namespace ckptdoc::gui {

namespace {

QChart* baseChart(const QString& title) {
  auto* c = new QChart;
  c->setTitle(title);
  QFont f = c->titleFont();
  f.setBold(true);
  c->setTitleFont(f);
  c->legend()->setVisible(false);
  c->setMargins(QMargins(4, 4, 4, 4));
  c->setBackgroundRoundness(0);
  return c;
}

QValueAxis* axis(const QString& title, double lo, double hi) {
  auto* a = new QValueAxis;
  a->setTitleText(title);
  a->setRange(lo, hi);
  QFont f = a->titleFont();
  f.setBold(false);
  a->setTitleFont(f);
  return a;
}

// Step outline of the bins [first, last] of a histogram, x = log10 of the edges.
QLineSeries* stepSeries(const LogHistogram& h, int first, int last, double* ymax) {
  auto* s = new QLineSeries;
  for (int i = first; i <= last; ++i) {
    const double x0 = LogHistogram::log10_lower_edge(i);
    const double x1 =
        i + 1 < LogHistogram::kBins ? LogHistogram::log10_lower_edge(i + 1) : x0 + std::log10(2.0) / 4.0;
    const double y = static_cast<double>(h.counts[static_cast<size_t>(i)]);
    *ymax = std::max(*ymax, y);
    s->append(x0, 0 == i - first ? 0 : s->points().back().y());
    s->append(x0, y);
    s->append(x1, y);
  }
  if (!s->points().isEmpty()) s->append(s->points().back().x(), 0);
  return s;
}

std::pair<int, int> nonZeroRange(const LogHistogram& h) {
  int first = -1, last = -1;
  for (int i = 0; i < LogHistogram::kBins; ++i)
    if (h.counts[static_cast<size_t>(i)]) {
      if (first < 0) first = i;
      last = i;
    }
  return {first, last};
}

void tooltipOnHover(QAreaSeries* area, const QString& what) {
  QObject::connect(area, &QAreaSeries::hovered, area, [what](const QPointF& p, bool state) {
    if (!state) return QToolTip::hideText();
    QToolTip::showText(QCursor::pos(), QStringLiteral("%1 ≈ 10^%2 (%3)")
                                           .arg(what)
                                           .arg(p.x(), 0, 'f', 2)
                                           .arg(QString::number(std::pow(10.0, p.x()), 'g', 3)));
  });
}

// Bucket lower bounds, short enough for a category axis: 0, 1, 2, 4, …, 1k, …, ≥64k.
// Counts are whole numbers: ticks every 1, 2 or 5 × 10^k elements from 0, labelled so that no two read the
// same (Qt's nice numbers put ticks at 0.2, 0.4, … for a count of 1, which "%.0f" prints as 0, 0, 0, 1, 1).
void countAxisFormat(QValueAxis* y, double ymax) {
  const double raw = std::max(1.0, ymax / 5.0);
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / decade;
  const double step = (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * decade;
  y->setRange(0, std::max(step, std::ceil(ymax * 1.05 / step) * step));
  y->setTickType(QValueAxis::TicksDynamic);
  y->setTickAnchor(0);
  y->setTickInterval(step);
  y->setLabelFormat(step >= 100000 ? QStringLiteral("%.3g") : QStringLiteral("%.0f"));
}

}  // namespace

QChart* emptyChart(const QString& title, const QString& why) {
  auto* c = baseChart(title);
  auto* s = new QLineSeries;
  c->addSeries(s);
  auto* x = axis(QString(), 0, 1);
  auto* y = axis(QString(), 0, 1);
  x->setLabelsVisible(false);
  y->setLabelsVisible(false);
  x->setGridLineVisible(false);
  y->setGridLineVisible(false);
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  s->attachAxis(x);
  s->attachAxis(y);
  x->setTitleText(why);
  return c;
}

QChart* logHistogramChart(const QString& title, const QString& xTitle, const LogHistogram& h,
                          const LogHistogram* negative, const QString& label, const QString& negativeLabel) {
  auto [first, last] = nonZeroRange(h);
  if (negative) {
    auto [nf, nl] = nonZeroRange(*negative);
    if (nf >= 0) {
      first = first < 0 ? nf : std::min(first, nf);
      last = std::max(last, nl);
    }
  }
  if (first < 0) {
    const uint64_t zeros = h.zeros;
    return emptyChart(title, zeros ? QObject::tr("all %1 values are exactly zero").arg(zeros)
                                   : QObject::tr("no non-zero values"));
  }
  first = std::max(0, first - 2);
  last = std::min(LogHistogram::kBins - 1, last + 2);
  auto* c = baseChart(title);
  double ymax = 0;
  auto* upper = stepSeries(h, first, last, &ymax);
  auto* area = new QAreaSeries(upper);
  area->setName(label);
  area->setColor(QColor(0x4e, 0x9b, 0xd8, 170));
  area->setBorderColor(QColor(0x1e, 0x62, 0xa0));
  c->addSeries(area);
  tooltipOnHover(area, label);
  QAreaSeries* negArea = nullptr;
  if (negative) {
    auto* nu = stepSeries(*negative, first, last, &ymax);
    negArea = new QAreaSeries(nu);
    negArea->setName(negativeLabel);
    negArea->setColor(QColor(0xe0, 0x8a, 0x00, 120));
    negArea->setBorderColor(QColor(0xb0, 0x60, 0x00));
    c->addSeries(negArea);
    tooltipOnHover(negArea, negativeLabel);
    c->legend()->setVisible(true);
    c->legend()->setAlignment(Qt::AlignTop);
  }
  const double x0 = LogHistogram::log10_lower_edge(first);
  const double x1 = last + 1 < LogHistogram::kBins ? LogHistogram::log10_lower_edge(last + 1) : x0 + 1;
  auto* x = axis(xTitle, std::floor(x0), std::ceil(x1));
  x->setTickType(QValueAxis::TicksDynamic);
  x->setTickAnchor(0);
  x->setTickInterval(std::max(1.0, std::ceil((std::ceil(x1) - std::floor(x0)) / 8.0)));
  x->applyNiceNumbers();
  x->setLabelFormat(QStringLiteral("%.0f"));
  auto* y = axis(QObject::tr("elements"), 0, std::max(1.0, ymax * 1.05));
  countAxisFormat(y, ymax);
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  area->attachAxis(x);
  area->attachAxis(y);
  if (negArea) {
    negArea->attachAxis(x);
    negArea->attachAxis(y);
  }
  QStringList notes;
  if (h.zeros) notes << QObject::tr("%1 zeros").arg(h.zeros);
  if (h.underflow) notes << QObject::tr("%1 below 2^%2").arg(h.underflow).arg(LogHistogram::kLogMinExp);
  if (h.overflow) notes << QObject::tr("%1 above 2^%2").arg(h.overflow).arg(LogHistogram::kLogMaxExp);
  if (h.nonfinite) notes << QObject::tr("%1 NaN/Inf").arg(h.nonfinite);
  if (!notes.isEmpty())
    x->setTitleText(xTitle + QStringLiteral("   (") + notes.join(QStringLiteral(", ")) + ")");
  return c;
}

QChart* ulpChart(const QString& title, const UlpHistogram& h) {
  auto* c = baseChart(title);
  auto* set = new QBarSet(QObject::tr("elements"));
  set->setColor(QColor(0x6c, 0xa0, 0x6c));
  QStringList cats, full;
  double ymax = 0;
  for (int b = 0; b < UlpHistogram::kBuckets; ++b) {
    *set << static_cast<double>(h.counts[static_cast<size_t>(b)]);
    ymax = std::max(ymax, static_cast<double>(h.counts[static_cast<size_t>(b)]));
    cats << QString::fromStdString(session::ulp_axis_label(b));
    full << QString::fromStdString(UlpHistogram::bucket_label(b));
  }
  auto* series = new QBarSeries;
  series->append(set);
  series->setBarWidth(0.9);
  c->addSeries(series);
  // A value axis labelled at every other bucket: category axes elide 18 labels in a small chart.
  auto* x = new QCategoryAxis;
  x->setRange(-0.5, UlpHistogram::kBuckets - 0.5);
  // Qt gives a label the width of its category (two bars): at the app's default size "≥64k" was elided to
  // "≥6…" in the standard font.
  QFont small = x->labelsFont();
  small.setPointSizeF(small.pointSizeF() * 0.78);
  x->setLabelsFont(small);
  x->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  for (int b = 0; b < UlpHistogram::kBuckets; b += (b == 0 ? 1 : 2)) x->append(cats.value(b), b);
  x->setTitleText(QObject::tr("ULPs between weight and rounded master"));
  x->setGridLineVisible(false);
  auto* y = axis(QObject::tr("elements"), 0, std::max(1.0, ymax * 1.05));
  countAxisFormat(y, ymax);
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  QObject::connect(set, &QBarSet::hovered, set, [set, full](bool state, int i) {
    if (!state) return QToolTip::hideText();
    QToolTip::showText(QCursor::pos(), QObject::tr("%1 ulp: %2 elements").arg(full.value(i)).arg(set->at(i)));
  });
  return c;
}

QChart* rankOffChart(const QString& title, const std::map<int, DivergenceStats>& perRank) {
  if (perRank.empty()) return emptyChart(title, QObject::tr("no per-rank divergence (no lp/fp32 pairs)"));
  auto* c = baseChart(title);
  const auto scale = session::OffScale::fit(perRank);
  auto* set = new QBarSet(QObject::tr("elements off"));
  QStringList cats, tips;
  for (const auto& [rank, d] : perRank) {
    const double off = session::off_fraction(d);
    *set << scale.height(off);
    cats << QString::number(rank);
    tips << QObject::tr("rank %1: %2 of %3 elements off (%4 %)")
                .arg(rank)
                .arg(d.count - d.exact)
                .arg(d.count)
                .arg(100.0 * off, 0, 'g', 4);
  }
  set->setColor(QColor(0xd3, 0x2f, 0x2f));
  auto* series = new QBarSeries;
  series->append(set);
  c->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(cats);
  x->setTitleText(QObject::tr("dp rank"));
  // Log scale: one label per decade of the share off, so 0.013 % is a bar and 100 % the top.
  auto* y = new QCategoryAxis;
  y->setTitleText(QObject::tr("elements off (log)"));
  y->setRange(0, scale.top());
  y->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  for (const auto& [at, text] : scale.ticks()) y->append(QString::fromStdString(text), at);
  QFont f = y->titleFont();
  f.setBold(false);
  y->setTitleFont(f);
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  QObject::connect(set, &QBarSet::hovered, set, [tips](bool state, int i) {
    if (!state) return QToolTip::hideText();
    QToolTip::showText(QCursor::pos(), tips.value(i));
  });
  return c;
}

QChart* densityChart(const QString& title, const analysis::Density2D& density) {
  if (density.pairs == 0) return emptyChart(title, QObject::tr("weights or fp32 master not available"));
  auto* c = baseChart(title);
  // Shades light to dark by log(count): level k holds bins with log1p(count) / log1p(max) in [k/L, (k+1)/L).
  static const QColor kShades[] = {QColor(0xc6, 0xdb, 0xef), QColor(0x9e, 0xca, 0xe1),
                                   QColor(0x6b, 0xae, 0xd6), QColor(0x42, 0x92, 0xc6),
                                   QColor(0x21, 0x71, 0xb5), QColor(0x08, 0x45, 0x94)};
  constexpr int kLevels = static_cast<int>(std::size(kShades));
  std::vector<QList<QPointF>> levels(kLevels);
  const double top = std::log1p(static_cast<double>(density.max_count));
  for (int iy = 0; iy < density.bins; ++iy)
    for (int ix = 0; ix < density.bins; ++ix)
      if (const uint64_t n = density.at(ix, iy)) {
        const int k =
            std::min(kLevels - 1, static_cast<int>(std::log1p(static_cast<double>(n)) / top * kLevels));
        levels[static_cast<size_t>(k)].append(QPointF(density.center(ix), density.center(iy)));
      }
  const double pad = (density.hi - density.lo) * 0.02;
  const double lo = density.lo - pad, hi = density.hi + pad;
  c->setTitle(title + QObject::tr(" (shade: elements per bin)"));
  auto* x = axis(QObject::tr("weight (upcast to fp32)"), lo, hi);
  auto* y = axis(QObject::tr("fp32 master"), lo, hi);
  x->applyNiceNumbers();  // ticks at round values (not -0.001, 0.044), the same on both axes
  y->setRange(x->min(), x->max());
  y->setTickCount(x->tickCount());
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  auto* diag = new QLineSeries;
  diag->append(lo, lo);
  diag->append(hi, hi);
  diag->setPen(QPen(QColor(0xc6, 0x28, 0x28), 1, Qt::DashLine));
  diag->setName(QObject::tr("y = x"));
  const auto shared = std::make_shared<analysis::Density2D>(density);
  for (int k = 0; k < kLevels; ++k) {
    auto* s = new QScatterSeries;
    s->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    s->setMarkerSize(6);
    s->setColor(kShades[k]);
    s->setBorderColor(Qt::transparent);
    // The legend is the colour bar: the elements per bin each shade stands for.
    const auto bound = [top](int level) {
      return static_cast<uint64_t>(std::llround(std::expm1(top * level / kLevels)));
    };
    s->setName(
        QStringLiteral("≤%1").arg(std::max<uint64_t>(1, bound(k + 1))));  // short: the legend is narrow
    s->replace(levels[static_cast<size_t>(k)]);
    c->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
    QObject::connect(s, &QScatterSeries::hovered, s, [shared](const QPointF& p, bool state) {
      if (!state) return QToolTip::hideText();
      const auto& d = *shared;
      const double w = (d.hi - d.lo) / d.bins;
      const int ix = std::clamp(static_cast<int>((p.x() - d.lo) / w), 0, d.bins - 1);
      const int iy = std::clamp(static_cast<int>((p.y() - d.lo) / w), 0, d.bins - 1);
      QToolTip::showText(QCursor::pos(), QObject::tr("weight %1 … %2\nmaster %3 … %4\n%5 elements")
                                             .arg(d.lo + ix * w, 0, 'g', 4)
                                             .arg(d.lo + (ix + 1) * w, 0, 'g', 4)
                                             .arg(d.lo + iy * w, 0, 'g', 4)
                                             .arg(d.lo + (iy + 1) * w, 0, 'g', 4)
                                             .arg(d.at(ix, iy)));
    });
  }
  c->addSeries(diag);  // on top: the line a healthy param's bins sit on
  diag->attachAxis(x);
  diag->attachAxis(y);
  c->legend()->setVisible(true);
  c->legend()->setAlignment(Qt::AlignBottom);
  return c;
}

QChart* stepChart(const QString& title, const QString& yTitle, const std::vector<StepSeries>& series,
                  StepScale scale, const QString& rightTitle) {
  const bool logY = scale == StepScale::Log;
  double x0 = 0, x1 = 0, l0 = 0, l1 = 0, r0 = 0, r1 = 0;
  bool anyX = false, anyL = false, anyR = false;
  auto widen = [](double v, double& lo, double& hi, bool& any) {
    lo = any ? std::min(lo, v) : v;
    hi = any ? std::max(hi, v) : v;
    any = true;
  };
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y) || (logY && !s.right && y <= 0)) continue;
      widen(x, x0, x1, anyX);
      if (s.right)
        widen(y, r0, r1, anyR);
      else
        widen(y, l0, l1, anyL);
    }
  if (!anyX) return emptyChart(title, QObject::tr("no snapshot has these numbers yet"));
  auto* c = baseChart(title);
  const double xpad = x1 > x0 ? (x1 - x0) * 0.05 : 1;
  auto* x = axis(QObject::tr("step"), x0 - xpad, x1 + xpad);
  x->applyNiceNumbers();
  x->setLabelFormat(QStringLiteral("%.0f"));
  c->addAxis(x, Qt::AlignBottom);
  QAbstractAxis* left = nullptr;
  if (logY) {
    auto* a = new QLogValueAxis;
    a->setTitleText(yTitle);
    a->setBase(10);
    a->setLabelFormat(QStringLiteral("%g"));
    a->setRange(anyL ? l0 / 2 : 1, anyL ? l1 * 2 : 10);
    left = a;
  } else if (scale == StepScale::Percent) {
    // A share: 100% at the top edge, not a nice number above it ("150 %" of elements).
    auto* a = axis(yTitle, anyL ? std::max(0.0, std::floor(l0 / 10) * 10 - (l0 >= 10 ? 10 : 0)) : 0, 100);
    a->setLabelFormat(QStringLiteral("%.4g"));
    left = a;
  } else {
    const double pad = l1 > l0 ? (l1 - l0) * 0.08 : std::max(1e-12, std::abs(l0) * 0.1 + (l0 == 0 ? 1 : 0));
    const double lo = anyL ? (l0 >= 0 ? std::max(0.0, l0 - pad) : l0 - pad) : 0, hi = anyL ? l1 + pad : 1;
    QValueAxis* a = nullptr;
    if (scale == StepScale::Count) {  // whole numbers on whole ticks from 0, as the histograms count
      a = axis(yTitle, 0, 1);
      countAxisFormat(a, anyL ? l1 : 1);
    } else {
      a = axis(yTitle, lo, hi);
      a->applyNiceNumbers();
    }
    left = a;
  }
  c->addAxis(left, Qt::AlignLeft);
  QValueAxis* right = nullptr;
  if (anyR) {
    const double pad = r1 > r0 ? (r1 - r0) * 0.08 : std::max(1e-12, std::abs(r0) * 0.1 + (r0 == 0 ? 1 : 0));
    right = axis(rightTitle, r0 >= 0 ? std::max(0.0, r0 - pad) : r0 - pad, r1 + pad);
    right->applyNiceNumbers();
    c->addAxis(right, Qt::AlignRight);
  }
  static const QColor kColors[] = {QColor(0x15, 0x65, 0xc0), QColor(0xc6, 0x28, 0x28),
                                   QColor(0x2e, 0x7d, 0x32)};
  int k = 0;
  for (const auto& s : series) {
    auto* line = new QLineSeries;
    auto* dots = new QScatterSeries;
    line->setName(s.name);
    const QColor colour = kColors[k++ % static_cast<int>(std::size(kColors))];
    line->setPen(QPen(colour, 2));
    dots->setColor(colour);
    dots->setBorderColor(colour);
    dots->setMarkerSize(7);
    for (const auto& [px, py] : s.points) {
      if (!std::isfinite(py) || (logY && !s.right && py <= 0)) continue;
      line->append(px, py);
      dots->append(px, py);
    }
    c->addSeries(line);
    c->addSeries(dots);
    for (auto* ser : {static_cast<QXYSeries*>(line), static_cast<QXYSeries*>(dots)}) {
      ser->attachAxis(x);
      ser->attachAxis(s.right && right ? static_cast<QAbstractAxis*>(right) : left);
    }
    const QString name = s.name;
    QObject::connect(dots, &QScatterSeries::hovered, dots, [name](const QPointF& p, bool state) {
      if (!state) return QToolTip::hideText();
      QToolTip::showText(QCursor::pos(), QStringLiteral("%1 at step %2: %3")
                                             .arg(name)
                                             .arg(static_cast<qint64>(std::llround(p.x())))
                                             .arg(QString::number(p.y(), 'g', 6)));
    });
  }
  if (series.size() > 1) {
    c->legend()->setVisible(true);
    c->legend()->setAlignment(Qt::AlignBottom);
    for (auto* m : c->legend()->markers())
      if (qobject_cast<QScatterSeries*>(m->series())) m->setVisible(false);
  }
  return c;
}

}  // namespace ckptdoc::gui
