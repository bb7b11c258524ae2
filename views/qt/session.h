#pragma once
// The attached checkpoint and its latest analysis. Opening builds the catalog only (no tensor bytes), so it
// is instant; analysis runs on a JobRunner, and a re-analysis or a newly opened checkpoint makes any running
// one stale. Views read from here and never open files themselves.
#include <QObject>
#include <QString>
#include <memory>
#include <optional>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "job_runner.h"

namespace ckptdoc::gui {

class Session : public QObject {
  Q_OBJECT
 public:
  explicit Session(QObject* parent = nullptr);

  // Opens a save folder, tag folder or rank file; on failure returns false and sets *error.
  bool open(const QString& path, QString* error = nullptr);
  void close();
  bool isOpen() const { return checkpoint_ != nullptr; }
  QString path() const { return path_; }

  std::shared_ptr<const deepspeed::Checkpoint> checkpoint() const { return checkpoint_; }
  const deepspeed::Catalog* catalog() const { return checkpoint_ ? &checkpoint_->catalog() : nullptr; }
  const analysis::Report* report() const { return report_ ? &*report_ : nullptr; }

  // Starts (or restarts) the background analysis; returns its job id, 0 when nothing is open.
  int analyse();
  void cancelAnalysis();
  bool analysing() const { return runner_.running(); }
  JobRunner& runner() { return runner_; }

  void setDevice(DeviceKind d) { device_ = d; }
  DeviceKind device() const { return device_; }
  void setVerifyChecksums(bool on) { verifyChecksums_ = on; }
  bool verifyChecksums() const { return verifyChecksums_; }

 signals:
  void opened();
  void closed();
  void analysisStarted(int job);
  void analysisProgress(const QString& stage, double fraction);
  void analysisFinished(int job);
  void analysisFailed(int job, const QString& message);
  void analysisCancelled(int job);

 private:
  JobRunner runner_;
  QString path_;
  std::shared_ptr<const deepspeed::Checkpoint> checkpoint_;
  std::optional<analysis::Report> report_;
  DeviceKind device_ = DeviceKind::Auto;
  bool verifyChecksums_ = false;
};

}  // namespace ckptdoc::gui
