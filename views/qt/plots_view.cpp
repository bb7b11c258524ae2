#include "plots_view.h"

#include <QDir>
#include <QGridLayout>
#include <QLabel>
#include <QRegularExpression>
#include <QVBoxLayout>

#include "chart_builder.h"
#include "chart_panel.h"
#include "session.h"

namespace ckptdoc::gui {

namespace {
constexpr int kDensityBins = 80;  // per axis: 6-pixel squares fill a ~480-pixel plot
}

PlotsView::PlotsView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(4, 4, 4, 4);
  heading_ = new QLabel(this);
  heading_->setStyleSheet(QStringLiteral("font-weight: 600;"));
  v->addWidget(heading_);
  auto* grid = new QGridLayout;
  grid->setSpacing(4);
  divergence_ = new ChartPanel(this);
  ulp_ = new ChartPanel(this);
  density_ = new ChartPanel(this);
  expAvg_ = new ChartPanel(this);
  expAvgSq_ = new ChartPanel(this);
  ranks_ = new ChartPanel(this);
  grid->addWidget(divergence_, 0, 0);
  grid->addWidget(ulp_, 0, 1);
  grid->addWidget(density_, 0, 2);
  grid->addWidget(expAvg_, 1, 0);
  grid->addWidget(expAvgSq_, 1, 1);
  grid->addWidget(ranks_, 1, 2);
  v->addLayout(grid, 1);
  connect(session_, &Session::analysisFinished, this, [this] {
    refreshSummary();
    showParam(param_);
  });
  connect(session_, &Session::opened, this, [this] {
    refreshSummary();
    showParam(QString());
  });
  connect(&densityJobs_, &JobRunner::failed, this, [this](int, const QString& m) {
    density_->setChartOwned(emptyChart(tr("weight vs fp32 master"), m));
    emit densityReady();
  });
  refreshSummary();
  showParam(QString());
}

std::vector<ChartPanel*> PlotsView::panels() const { return {divergence_, ulp_, density_, expAvg_, expAvgSq_, ranks_}; }

void PlotsView::refreshSummary() {
  std::map<int, DivergenceStats> perRank;
  if (const auto* r = session_->report())
    for (const auto& p : r->params)
      for (const auto& [rank, d] : p.per_rank) perRank[rank].merge(d);
  ranks_->setChartOwned(rankExactChart(tr("Exact fraction per rank (all params)"), perRank));
}

void PlotsView::showParam(const QString& name) {
  param_ = name;
  const analysis::ParamReport* pr = nullptr;
  if (const auto* r = session_->report())
    for (const auto& p : r->params)
      if (QString::fromStdString(p.name) == name) pr = &p;
  const QString why = session_->report() ? tr("select a param in the table") : tr("analyse first (F5)");
  heading_->setText(name.isEmpty() ? tr("No param selected") : tr("Param %1").arg(name));
  if (!pr) {
    divergence_->setChartOwned(emptyChart(tr("|fp32 − weight|"), why));
    ulp_->setChartOwned(emptyChart(tr("ULP distance"), why));
    expAvg_->setChartOwned(emptyChart(tr("exp_avg"), why));
    expAvgSq_->setChartOwned(emptyChart(tr("exp_avg_sq"), why));
  } else {
    if (pr->lp_vs_fp32) {
      divergence_->setChartOwned(logHistogramChart(tr("|fp32 − weight|"), tr("log10 |Δ|"), pr->lp_vs_fp32->log_abs_diff,
                                                   nullptr, QStringLiteral("|Δ|")));
      ulp_->setChartOwned(ulpChart(tr("ULP distance"), pr->lp_vs_fp32->ulp));
    } else {
      divergence_->setChartOwned(emptyChart(tr("|fp32 − weight|"), tr("no weight/master pair (ZeRO-3 placeholder?)")));
      ulp_->setChartOwned(emptyChart(tr("ULP distance"), tr("no weight/master pair")));
    }
    if (pr->exp_avg)
      expAvg_->setChartOwned(logHistogramChart(tr("exp_avg"), tr("log10 |exp_avg|"), pr->exp_avg->log_abs,
                                               &pr->exp_avg->log_abs_negative, QStringLiteral("all"),
                                               QStringLiteral("negative")));
    else
      expAvg_->setChartOwned(emptyChart(tr("exp_avg"), tr("no exp_avg in the optimizer state")));
    if (pr->exp_avg_sq)
      expAvgSq_->setChartOwned(logHistogramChart(tr("exp_avg_sq"), tr("log10 exp_avg_sq"), pr->exp_avg_sq->log_abs,
                                                 pr->exp_avg_sq->negatives ? &pr->exp_avg_sq->log_abs_negative : nullptr,
                                                 QStringLiteral("all"), QStringLiteral("negative (invalid)")));
    else
      expAvgSq_->setChartOwned(emptyChart(tr("exp_avg_sq"), tr("no exp_avg_sq in the optimizer state")));
  }

  // The density reads this one param's slices from every rank, off the UI thread.
  const auto ckpt = session_->checkpoint();
  const auto where = ckpt && !name.isEmpty() ? ckpt->catalog().find_param(name.toStdString()) : std::nullopt;
  if (!where) {
    densityJobs_.invalidate();
    density_->setChartOwned(emptyChart(tr("weight vs fp32 master"), name.isEmpty() ? why : tr("not a trainable param")));
    return;
  }
  density_->setChartOwned(emptyChart(tr("weight vs fp32 master"), tr("loading…")));
  const QString title = tr("weight vs fp32 master");
  densityJobs_.run<analysis::Density2D>(
      tr("Counting %1").arg(name),
      [ckpt, where](Progress& p) {
        const auto data = ckpt->assemble(where->first, where->second, false);
        p.check();
        if (!data.lp || data.fp32.empty()) return analysis::Density2D{};
        const std::vector<float> lp = data.lp->to_float();
        ckpt->check_unchanged();  // a rank file cut while mapped reads as zeros: no plot from those
        return analysis::density_2d(lp, data.fp32, kDensityBins);
      },
      [this, title](analysis::Density2D& d) {
        density_->setChartOwned(densityChart(title, d));
        emit densityReady();
      });
}

QStringList PlotsView::exportAll(const QString& dir, const QString& suffix) {
  QStringList written;
  int n = 0;
  for (auto* panel : panels()) {
    QString t = panel->chart() ? panel->chart()->title() : QStringLiteral("chart");
    t.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9_]+")), QStringLiteral("_"));
    const QString path = QDir(dir).filePath(QStringLiteral("%1-%2.%3").arg(++n).arg(t, suffix));
    if (panel->exportTo(path)) written << path;
  }
  return written;
}

}  // namespace ckptdoc::gui
