#pragma once
// Convert to a universal checkpoint: output folder, the DeepSpeed version to write for (default: the
// checkpoint's own), a summary of what its loader reads and its known gaps (universal::target_version), then
// the conversion as a session job with progress and cancel, and the result core verified. The input is never
// modified.
#include <QDialog>
#include <optional>

#include "ckptdoc/session/job.h"
#include "ckptdoc/sources/checkpoint/convert.h"

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;

namespace ckptdoc::gui {

class JobFooter;

class Session;

class ConvertDialog : public QDialog {
  Q_OBJECT
 public:
  explicit ConvertDialog(Session* session, QWidget* parent = nullptr);

  QString output() const;
  void setOutput(const QString& path);
  QString summaryText() const;
  bool canRun() const { return canRun_; }
  const universal::ConvertResult* result() const { return result_ ? &*result_ : nullptr; }
  QPushButton* runButton() const { return run_; }

 signals:
  void convertFinished(bool verified);
  void openRequested(const QString& path);

 private:
  void updateSummary();
  void startConvert();
  void showResult();
  void showProgress();

  Session* session_;
  QLineEdit* output_;
  QLineEdit* version_;
  QPlainTextEdit* summary_;
  JobFooter* footer_;
  QPushButton* run_;  // footer_'s
  session::JobPtr job_;
  bool canRun_ = false;
  std::optional<universal::ConvertResult> result_;
};

}  // namespace ckptdoc::gui
