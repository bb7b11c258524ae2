#pragma once
// Builds Qt Charts from core's histograms and statistics. Each function returns a new chart the caller owns;
// all have axis titles and hover tooltips.
#include <QChart>
#include <map>
#include <utility>
#include <vector>

#include "ckptdoc/analysis/density.h"
#include "ckptdoc/compute/statistics.h"

namespace ckptdoc::gui {

// A log-magnitude histogram as a step area over log10 of the bin edges. `negative` (optional) is drawn
// as a second series (e.g. the negative values of exp_avg).
QChart* logHistogramChart(const QString& title, const QString& xTitle, const LogHistogram& h,
                          const LogHistogram* negative = nullptr,
                          const QString& label = QStringLiteral("|x|"),
                          const QString& negativeLabel = QStringLiteral("negative"));
// The ULP-distance buckets of a divergence as bars.
QChart* ulpChart(const QString& title, const UlpHistogram& h);
// Elements off per dp rank (weight != master rounded) as bars on session::OffScale's log scale.
QChart* rankOffChart(const QString& title, const std::map<int, DivergenceStats>& perRank);
// lp (x) against fp32 master (y) as a density: every element counted in a 2-D histogram, each non-empty bin a
// square shaded by log(count), with the y = x diagonal; hovering a bin shows its ranges and count.
QChart* densityChart(const QString& title, const analysis::Density2D& density);
// Values against the training step (a timeline): one line with markers per series; a second axis on the
// right for the series with `right` set; `logY`: a log10 left axis (for values spanning decades, e.g. the
// loss scale; non-positive values are left out). Hovering a marker shows step and value.
struct StepSeries {
  QString name;
  std::vector<std::pair<double, double>> points;  // (step, value)
  bool right = false;
};
// The left axis of a step chart: a plain value, a log scale (loss scale), a share in percent (0-100, never
// padded past 100), or a count (whole numbers from 0).
enum class StepScale { Linear, Log, Percent, Count };
QChart* stepChart(const QString& title, const QString& yTitle, const std::vector<StepSeries>& series,
                  StepScale scale = StepScale::Linear, const QString& rightTitle = {});
// An empty chart saying why there is nothing to show.
QChart* emptyChart(const QString& title, const QString& why);

}  // namespace ckptdoc::gui
