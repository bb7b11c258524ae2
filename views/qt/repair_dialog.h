#pragma once
// Repair preview and run: the user picks the actions (a finding's Fix preselects its kind; Checkpoint >
// Repair… preselects none) and sees the plan core computes for them (session::plan_repair, on a worker; each
// change supersedes the plan being computed), or the planner's refusal in its words; the output folder
// (default `<name>-fixed` beside the input; the input is never modified) and the device; Repair runs it as a
// session job with progress and cancel, then shows core's verification.
#include <QDialog>
#include <memory>
#include <optional>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/session/job.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;

namespace ckptdoc::gui {

class JobFooter;

class RepairActions;
class Session;

class RepairDialog : public QDialog {
  Q_OBJECT
 public:
  // kind: the action preselected (a finding's Fix); None preselects nothing.
  RepairDialog(Session* session, analysis::RepairKind kind = analysis::RepairKind::None,
               QWidget* parent = nullptr);

  static QString defaultOutput(const model::Catalog& catalog);
  // Ticks the actions `r` asks for and plans them (a finding's Fix of several actions).
  void presetActions(const repair::RepairRequest& r);
  repair::RepairRequest request() const;
  QString output() const;
  void setOutput(const QString& path);
  // Repartition onto the layout of another checkpoint (--target) instead of a new world size; empty clears.
  void setTemplate(const QString& path);
  bool planValid() const { return planValid_; }
  bool planning() const { return planJob_ && !planJob_->finished(); }
  QString planText() const;
  const repair::RepairResult* result() const { return result_ ? &*result_ : nullptr; }
  QPushButton* runButton() const { return run_; }
  RepairActions* actions() const { return actions_; }

 signals:
  void planReady(bool valid);  // the plan for the current fields arrived (or was refused)
  void repairFinished(bool clean);
  void openRequested(const QString& path);

 private:
  void updatePlan();
  void startRepair();
  void showResult();
  void showProgress();

  Session* session_;
  QLineEdit* output_;
  QComboBox* device_;
  RepairActions* actions_;
  QPlainTextEdit* plan_;
  QLabel* planError_;
  JobFooter* footer_;
  QPushButton* run_;  // footer_'s
  session::JobPtr planJob_, runJob_;
  bool planValid_ = false;
  std::optional<repair::RepairResult> result_;
};

}  // namespace ckptdoc::gui
