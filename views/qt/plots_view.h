#pragma once
// The plots of the selected param: divergence (log10 |Δ| and ULP buckets), weight vs master density
// (every element counted, streamed from the memory map by a session job), exp_avg and exp_avg_sq magnitude
// histograms, and the per-rank exact fraction of the whole checkpoint. Each chart exports to PNG/SVG.
#include <QWidget>
#include <vector>

#include "ckptdoc/session/job.h"

class QLabel;

namespace ckptdoc::gui {

class ChartPanel;
class Session;

class PlotsView : public QWidget {
  Q_OBJECT
 public:
  explicit PlotsView(Session* session, QWidget* parent = nullptr);
  void showParam(const QString& name);  // empty clears
  QString currentParam() const { return param_; }
  std::vector<ChartPanel*> panels() const;
  // Saves every chart as <dir>/<n>-<title>.{png,svg}; returns the files written.
  QStringList exportAll(const QString& dir, const QString& suffix);
  bool densityLoading() const { return densityJob_ && !densityJob_->finished(); }

 signals:
  void densityReady();

 private:
  void refreshSummary();
  ChartPanel* divergence_;
  ChartPanel* ulp_;
  ChartPanel* density_;
  ChartPanel* expAvg_;
  ChartPanel* expAvgSq_;
  ChartPanel* ranks_;
  QLabel* heading_;
  Session* session_;
  QString param_;
  session::JobPtr densityJob_;
};

}  // namespace ckptdoc::gui
