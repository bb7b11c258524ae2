#pragma once
// Repair of a source that repairs itself (a DCP, Accelerate or Megatron-core folder; a Trainer or Accelerate
// optimizer folder the catalog reads), as `ckptdoc repair FOLDER -o OUT` runs it (Session::repair_source):
// the actions ticked (a finding's Fix ticks its own; one the source refuses on this folder is off, with why),
// the output folder (default `<name>-fixed` beside the input; the input is never written); Repair shows what
// the source's repair says, or its refusal in the words of these controls. The source's own repair verifies
// what it wrote.
#include <QDialog>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/session/job.h"

class QCheckBox;
class QLineEdit;

namespace ckptdoc::gui {

class JobFooter;
class Session;

class SourceRepairDialog : public QDialog {
  Q_OBJECT
 public:
  SourceRepairDialog(Session* session, model::RepairKind kind, QWidget* parent = nullptr);
  QCheckBox* refreshFp32() const { return refresh_; }
  QCheckBox* resetOptimizer() const { return reset_; }
  QCheckBox* dropOptimizer() const { return drop_; }
  QString output() const;
  void setOutput(const QString& path);
  QPushButton* runButton() const;
  QString resultText() const { return result_; }

 signals:
  void repairFinished(bool ok);
  void openRequested(const QString& path);

 private:
  void start();
  void showProgress();  // the job's stage and bytes (or records) done, on the session's progress tick

  Session* session_;
  QCheckBox* refresh_;
  QCheckBox* reset_;
  QCheckBox* drop_;
  QLineEdit* output_;
  JobFooter* footer_;
  session::JobPtr job_;
  QString result_;  // the repair's text, or why it failed
};

}  // namespace ckptdoc::gui
