#pragma once
// The first thing a user sees: what the checkpoint is (stage, dtypes, world sizes, steps) and what is wrong
// with it: the strip of every param (divergence, moments, NaN/Inf; click to select), then one card per
// finding coloured by severity, each repairable finding with a Fix button.
#include <QWidget>

class QLabel;
class QVBoxLayout;

namespace ckptdoc::gui {

class FindingsModel;
class ParamStrip;
class StripLegend;
class Session;

class OverviewView : public QWidget {
  Q_OBJECT
 public:
  OverviewView(Session* session, FindingsModel* findings, QWidget* parent = nullptr);
  ParamStrip* strip() const { return strip_; }

 signals:
  void fixRequested(int findingRow);
  void paramActivated(const QString& name);

 private:
  void rebuildSummary();
  void rebuildStorageSummary();
  void rebuildCards();

  Session* session_;
  FindingsModel* findings_;
  QLabel* title_;
  QLabel* summary_;
  QLabel* status_;
  ParamStrip* strip_;
  StripLegend* stripLegend_;
  QWidget* cards_;
  QVBoxLayout* cardsLayout_;
};

}  // namespace ckptdoc::gui
