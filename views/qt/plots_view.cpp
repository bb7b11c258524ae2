#include "plots_view.h"

#include <QDir>
#include <QGridLayout>
#include <QLabel>
#include <QPointer>
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
  refreshSummary();
  showParam(QString());
}

std::vector<ChartPanel*> PlotsView::panels() const {
  return {divergence_, ulp_, density_, expAvg_, expAvgSq_, ranks_};
}

void PlotsView::refreshSummary() {
  const auto& perRank = session_->core().per_rank_divergence();  // merged on the analysis' worker
  ranks_->setChartOwned(rankOffChart(tr("Elements off per rank (all params)"), perRank));
}

void PlotsView::showParam(const QString& name) {
  param_ = name;
  const analysis::ParamReport* pr = session_->core().param_report(name.toStdString());
  const QString why = session_->report() ? tr("select a param in the table") : tr("analyse first (F5)");
  heading_->setText(name.isEmpty() ? tr("No param selected") : tr("Param %1").arg(name));
  if (!pr) {
    divergence_->setChartOwned(emptyChart(tr("|fp32 − weight|"), why));
    ulp_->setChartOwned(emptyChart(tr("ULP distance"), why));
    expAvg_->setChartOwned(emptyChart(tr("exp_avg"), why));
    expAvgSq_->setChartOwned(emptyChart(tr("exp_avg_sq"), why));
  } else {
    if (pr->lp_vs_fp32) {
      divergence_->setChartOwned(logHistogramChart(tr("|fp32 − weight|"), tr("log10 |Δ|"),
                                                   pr->lp_vs_fp32->log_abs_diff, nullptr,
                                                   QStringLiteral("|Δ|")));
      ulp_->setChartOwned(ulpChart(tr("ULP distance"), pr->lp_vs_fp32->ulp));
    } else if (pr->lp) {
      // Weights read with nothing to compare them with (a weights folder, a checkpoint without optimizer
      // state): their own values are what there is to see.
      divergence_->setChartOwned(logHistogramChart(tr("weight values"), tr("log10 |weight|"), pr->lp->log_abs,
                                                   &pr->lp->log_abs_negative, QStringLiteral("all"),
                                                   QStringLiteral("negative")));
      ulp_->setChartOwned(emptyChart(tr("ULP distance"), tr("no fp32 master to compare the weight with")));
    } else {
      divergence_->setChartOwned(
          emptyChart(tr("|fp32 − weight|"), tr("no weight/master pair (ZeRO-3 placeholder?)")));
      ulp_->setChartOwned(emptyChart(tr("ULP distance"), tr("no weight/master pair")));
    }
    if (pr->exp_avg)
      expAvg_->setChartOwned(logHistogramChart(tr("exp_avg"), tr("log10 |exp_avg|"), pr->exp_avg->log_abs,
                                               &pr->exp_avg->log_abs_negative, QStringLiteral("all"),
                                               QStringLiteral("negative")));
    else
      expAvg_->setChartOwned(emptyChart(tr("exp_avg"), tr("no exp_avg in the optimizer state")));
    if (pr->exp_avg_sq)
      expAvgSq_->setChartOwned(
          logHistogramChart(tr("exp_avg_sq"), tr("log10 exp_avg_sq"), pr->exp_avg_sq->log_abs,
                            pr->exp_avg_sq->negatives ? &pr->exp_avg_sq->log_abs_negative : nullptr,
                            QStringLiteral("all"), QStringLiteral("negative (invalid)")));
    else
      expAvgSq_->setChartOwned(emptyChart(tr("exp_avg_sq"), tr("no exp_avg_sq in the optimizer state")));
  }

  // The density streams this one param's slices from every rank's memory map, on a worker; selecting another
  // param supersedes it.
  const auto where =
      session_->isOpen() && !name.isEmpty() ? session_->core().find_param(name.toStdString()) : std::nullopt;
  if (!where) {
    if (densityJob_) densityJob_->cancel();
    densityJob_.reset();
    density_->setChartOwned(
        emptyChart(tr("weight vs fp32 master"), name.isEmpty() ? why : tr("not a trainable param")));
    return;
  }
  density_->setChartOwned(emptyChart(tr("weight vs fp32 master"), tr("loading…")));
  const QString title = tr("weight vs fp32 master");
  QPointer<PlotsView> self(this);
  densityJob_ = session_->core().density(
      name.toStdString(), kDensityBins, [self, title](session::Outcome<analysis::Density2D>& o) {
        if (!self || o.superseded() || o.job != self->densityJob_) return;
        self->density_->setChartOwned(o.ok() ? densityChart(title, *o.value)
                                             : emptyChart(title, errorText(*o.error)));
        emit self->densityReady();
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
