#pragma once
// Repair preview and run: shows the plan core computes (repair::make_plan) for the finding's repair, the
// output folder (default `<name>-fixed` beside the input; the input is never modified) and the device;
// Repair runs it in the background with progress and cancel, then shows core's verification.
#include <QDialog>
#include <memory>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/repair/plan.h"
#include "job_runner.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace ckptdoc::gui {

class RepairDialog : public QDialog {
  Q_OBJECT
 public:
  RepairDialog(std::shared_ptr<const deepspeed::Checkpoint> checkpoint, analysis::RepairKind kind,
               DeviceKind device, QWidget* parent = nullptr);

  static QString defaultOutput(const deepspeed::Catalog& catalog);
  repair::RepairRequest request() const;
  QString output() const;
  void setOutput(const QString& path);
  bool planValid() const { return planValid_; }
  QString planText() const;
  const repair::RepairResult* result() const { return result_ ? &*result_ : nullptr; }
  QPushButton* runButton() const { return run_; }

 signals:
  void repairFinished(bool clean);
  void openRequested(const QString& path);

 private:
  void updatePlan();
  void startRepair();
  void showResult();

  std::shared_ptr<const deepspeed::Checkpoint> ckpt_;
  analysis::RepairKind kind_;
  QLineEdit* output_;
  QComboBox* device_;
  QSpinBox* worldSize_ = nullptr;
  QPlainTextEdit* plan_;
  QLabel* planError_;
  QProgressBar* progress_;
  QLabel* stage_;
  QLabel* resultLabel_;
  QPushButton* run_;
  QPushButton* cancel_;
  QPushButton* openOutput_;
  JobRunner jobs_;
  bool planValid_ = false;
  std::optional<repair::RepairResult> result_;
};

}  // namespace ckptdoc::gui
