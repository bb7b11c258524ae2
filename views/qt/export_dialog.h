#pragma once
// Weights export (deepspeed::export_weights): format, dtype and source (fp32 masters as zero_to_fp32.py
// does, or the lp weights), run as a session job with progress and cancel. For a self-reporting source (a
// DCP, Accelerate or Megatron-core folder) its own export (Session::export_source): safetensors, or torch
// where the source writes it, in one file or shards.
#include <QDialog>
#include <memory>
#include <optional>
#include <string>

#include "ckptdoc/session/job.h"
#include "ckptdoc/sources/deepspeed/export_options.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;

namespace ckptdoc::gui {

class Session;

class ExportDialog : public QDialog {
  Q_OBJECT
 public:
  ExportDialog(Session* session, QWidget* parent = nullptr);
  deepspeed::ExportOptions options() const;
  QString outputPath() const;
  void setOutputPath(const QString& path);
  QPushButton* runButton() const { return run_; }
  QLabel* status() const { return status_; }  // what the last export said

 signals:
  void exported(const QString& path);

 private:
  void suggestPath();
  void start();
  void startSourceExport();
  bool confirmReplace(bool& force);
  void showProgress();
  Session* session_;
  QComboBox* format_;
  QComboBox* source_;
  QComboBox* dtype_;
  QCheckBox* excludeFrozen_;
  QLineEdit* shardSize_ = nullptr;  // a self-reporting source's export only
  bool storage_;                    // the open source is self-reporting (no catalog)
  QLineEdit* path_;
  QProgressBar* progress_;
  QLabel* status_;
  QPushButton* run_;
  QPushButton* close_;
  session::JobPtr job_;
  std::optional<std::string>
      stale_;  // why the fp32 masters should not be exported (the diagnosis found them stale)
};

}  // namespace ckptdoc::gui
