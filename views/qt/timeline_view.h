#pragma once
// The Timeline tab of attach mode: per-snapshot exact fraction, gradient norm, loss scale and NaN/Inf counts
// against the training step, the selected param's lp-vs-fp32 divergence over time, and the snapshots as a
// table. A thin view: it only reads the session's watch samples (summaries made on the worker).
#include <QWidget>

class QLabel;
class QTableView;

namespace ckptdoc::gui {

class ChartPanel;
class Session;
class TimelineModel;

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  TimelineView(Session* session, QWidget* parent = nullptr);

  void selectParam(const QString& name);  // the param whose divergence is plotted
  QString selectedParam() const { return param_; }
  // A line about the attached run ("Attached to …", or what went wrong: a snapshot deleted, unreadable).
  void setNotice(const QString& text, bool warning);
  QString notice() const;

  TimelineModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  ChartPanel* exactChart() const { return exact_; }
  ChartPanel* gradNormChart() const { return gradNorm_; }
  ChartPanel* lossScaleChart() const { return lossScale_; }
  ChartPanel* nonFiniteChart() const { return nonFinite_; }
  ChartPanel* paramChart() const { return param_chart_; }

 private:
  void refresh();
  void redrawParam();

  Session* session_;
  TimelineModel* model_;
  QLabel* notice_;
  QTableView* table_;
  ChartPanel *exact_, *gradNorm_, *lossScale_, *nonFinite_, *param_chart_;
  QString param_;
};

}  // namespace ckptdoc::gui
