#include "timeline_view.h"

#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

#include "chart_builder.h"
#include "chart_panel.h"
#include "session.h"
#include "timeline_model.h"

namespace ckptdoc::gui {

namespace {

// (step, value) of every sample, in step order, for the values that exist.
template <class Fn>
std::vector<std::pair<double, double>> points(const TimelineModel& m,
                                              const std::vector<session::WatchSample>& samples, Fn value) {
  std::vector<std::pair<double, double>> out;
  for (int r = 0; r < m.rowCount(); ++r) {
    const auto& s = samples[static_cast<size_t>(m.sampleIndex(r))];
    if (const std::optional<double> v = value(s); v && std::isfinite(*v))
      out.emplace_back(static_cast<double>(s.step), *v);
  }
  return out;
}

}  // namespace

TimelineView::TimelineView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  model_ = new TimelineModel(session, this);
  notice_ = new QLabel(tr("Not attached. File > Attach to run… follows a folder of snapshots written by "
                          "ckptdoc_hook (or start with `ckptdoc gui --watch DIR`)."),
                       this);
  notice_->setObjectName(QStringLiteral("timelineNotice"));
  notice_->setWordWrap(true);
  notice_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* charts = new QWidget(this);
  auto* grid = new QGridLayout(charts);
  grid->setContentsMargins(0, 0, 0, 0);
  exact_ = new ChartPanel(charts);
  gradNorm_ = new ChartPanel(charts);
  lossScale_ = new ChartPanel(charts);
  nonFinite_ = new ChartPanel(charts);
  param_chart_ = new ChartPanel(charts);
  grid->addWidget(exact_, 0, 0);
  grid->addWidget(gradNorm_, 0, 1);
  grid->addWidget(lossScale_, 0, 2);
  grid->addWidget(nonFinite_, 1, 0);
  grid->addWidget(param_chart_, 1, 1, 1, 2);

  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(model_);
  proxy->setSortRole(TimelineModel::SortRole);
  table_ = new QTableView(this);
  table_->setObjectName(QStringLiteral("timelineTable"));
  table_->setModel(proxy);
  table_->setSortingEnabled(true);
  table_->sortByColumn(TimelineModel::Step, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(charts);
  split->addWidget(table_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(notice_);
  layout->addWidget(split, 1);

  connect(session_, &Session::watchSampled, this, &TimelineView::refresh);
  connect(session_, &Session::snapshotRemoved, model_, &TimelineModel::refreshStates);  // the charts stay
  connect(session_, &Session::closed, this, &TimelineView::refresh);
  connect(session_, &Session::attachEnded, this, &TimelineView::refresh);
  connect(session_, &Session::opened, this, [this] {
    if (session_->samples().empty() && model_->rowCount() > 0) refresh();  // another source: samples cleared
  });
  refresh();
}

void TimelineView::setNotice(const QString& text, bool warning) {
  notice_->setText(text);
  notice_->setStyleSheet(warning ? QStringLiteral("QLabel { color: #b71c1c; font-weight: bold; }")
                                 : QString());
}

QString TimelineView::notice() const {
  return notice_->text();
}

void TimelineView::selectParam(const QString& name) {
  if (name == param_) return;
  param_ = name;
  redrawParam();
}

void TimelineView::refresh() {
  model_->refresh();
  const auto& samples = session_->samples();
  const auto& m = *model_;
  using S = session::WatchSample;
  exact_->setChartOwned(stepChart(tr("Exact fraction (lp = round(fp32))"), tr("% of elements"),
                                  {{tr("exact"), points(m, samples,
                                                        [](const S& s) -> std::optional<double> {
                                                          return std::isnan(s.summary.exact_fraction)
                                                                     ? std::nullopt
                                                                     : std::optional<double>(
                                                                           s.summary.exact_fraction * 100);
                                                        })}},
                                  StepScale::Percent));
  gradNorm_->setChartOwned(
      stepChart(tr("Gradient norm"), tr("global L2 norm"),
                {{tr("grad norm"), points(m, samples, [](const S& s) { return s.summary.grad_norm; })}}));
  lossScale_->setChartOwned(
      stepChart(tr("Loss scale (fp16)"), tr("scale"),
                {{tr("loss scale"), points(m, samples, [](const S& s) { return s.summary.loss_scale; })}},
                StepScale::Log));
  nonFinite_->setChartOwned(stepChart(
      tr("NaN/Inf counts"), tr("elements"),
      {{tr("in weights, masters, moments"), points(m, samples,
                                                   [](const S& s) {
                                                     return std::optional<double>(
                                                         static_cast<double>(s.summary.nonfinite_values));
                                                   })},
       {tr("in recorded gradients"), points(m, samples,
                                            [](const S& s) {
                                              return std::optional<double>(
                                                  static_cast<double>(s.summary.nonfinite_grads));
                                            })}},
      StepScale::Count));
  if (param_.isEmpty() && session_->isOpen()) param_ = QString::fromStdString(session_->core().worst_param());
  redrawParam();
}

void TimelineView::redrawParam() {
  const auto& samples = session_->samples();
  const std::string name = param_.toStdString();
  auto metric = [&](auto field) {
    return points(*model_, samples, [&](const session::WatchSample& s) -> std::optional<double> {
      auto it = s.summary.params.find(name);
      if (it == s.summary.params.end()) return std::nullopt;
      return field(it->second);
    });
  };
  const QString title = param_.isEmpty() ? tr("Divergence of the selected param")
                                         : tr("Divergence of %1 (lp vs fp32 master)").arg(param_);
  StepSeries exact{tr("exact fraction (%)"),
                   metric([](const snapshot::ParamPoint& p) { return p.exact_fraction * 100; }), false};
  StepSeries maxAbs{tr("max |fp32 − lp|"), metric([](const snapshot::ParamPoint& p) { return p.max_abs; }),
                    true};
  param_chart_->setChartOwned(
      stepChart(title, tr("exact %"), {exact, maxAbs}, StepScale::Percent, tr("max |fp32 − lp|")));
}

}  // namespace ckptdoc::gui
