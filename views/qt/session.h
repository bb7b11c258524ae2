#pragma once
// The Qt face of core's session::Session: the same source, analysis and jobs, with Qt signals for the
// widgets. Workers wake the UI thread with a queued call to poll(), so every result lands on the UI thread; a
// timer reads running jobs' progress while any runs. Views read from here and never open files themselves.
#include <QObject>
#include <QString>
#include <QTimer>
#include <memory>

#include "ckptdoc/session/session.h"

namespace ckptdoc::gui {

class Session : public QObject {
  Q_OBJECT
 public:
  explicit Session(QObject* parent = nullptr);
  ~Session() override;

  session::Session& core() { return core_; }
  const session::Session& core() const { return core_; }

  // Starts opening a save folder, tag folder or rank file on a worker; opened() or openFailed() follows (and,
  // after opened(), the analysis). Returns the open job.
  session::JobPtr open(const QString& path);
  void close();
  bool isOpen() const { return core_.is_open(); }
  bool isOpening() const { return core_.opening() != nullptr; }
  QString path() const { return QString::fromStdString(core_.path()); }

  // The open catalog source's catalog, owning what it reads from; null for a self-reporting source.
  std::shared_ptr<const model::Catalog> sharedCatalog() const { return core_.shared_catalog(); }
  const model::Catalog* catalog() const { return core_.catalog(); }
  const analysis::Report* report() const { return core_.report(); }

  // Starts (or restarts) the background analysis; returns its job id, 0 when nothing is open.
  int analyse();
  void cancelAnalysis() { core_.cancel_analysis(); }
  bool analysing() const { return core_.analysing(); }

  // Compares the open source (A) with `other` (B) on a worker; a new request supersedes the running one.
  session::JobPtr diff(const QString& other, const analysis::DiffOptions& options,
                       session::Done<analysis::DiffResult> done);

  void setDevice(DeviceKind d) { core_.settings().device = d; }
  DeviceKind device() const { return core_.settings().device; }
  void setVerifyChecksums(bool on) { core_.settings().verify_checksums = on; }
  bool verifyChecksums() const { return core_.settings().verify_checksums; }

  // Attach mode: follows a folder of live-run snapshots (core's watch with follow): every snapshot committed
  // there becomes the open source with its analysis, and its numbers join samples(). Replaces the open source
  // at the first snapshot; opening anything else, or detach(), ends it (attachEnded()).
  void attach(const QString& dir);
  void detach();
  bool isAttached() const { return watchJob_ && !watchJob_->finished(); }
  QString attachedDir() const { return attachedDir_; }
  const std::vector<session::WatchSample>& samples() const { return core_.samples(); }

  // A job a dialog submitted through core() (export, repair, convert): the progress timer runs until it ends,
  // so jobsProgressed() moves its bar (it used to run only while an open or analysis had started it).
  void followProgress(const session::JobPtr& job) {
    if (job) timer_.start();
  }

  // Tests: delivers whatever is ready now (normally the event loop does it).
  void pollNow() { core_.poll(); }

 signals:
  void opening(const QString& path);
  void opened();
  void openFailed(const QString& path, const QString& message);
  void closed();
  void analysisStarted(int job);
  void analysisProgress(const QString& stage, double fraction);
  void analysisFinished(int job);
  void analysisFailed(int job, const QString& message);
  void analysisCancelled(int job);
  void watchSampled();
  void attached(const QString& dir);
  void attachEnded(const QString& dir, const QString& message);  // message empty when detached on purpose
  // A watched snapshot's folder went away; `shown`: it is the one on screen (its last analysis stays).
  void snapshotRemoved(const QString& path, bool shown);
  void snapshotUnreadable(const QString& path, const QString& message);
  void jobsProgressed();  // every 50 ms while any job runs, and once when they all ended

 private:
  void onEvent(session::Event e, const session::JobPtr& job, const session::JobError* error);
  void tick();

  session::Session core_;
  QTimer timer_;
  QString openingPath_;
  QString attachedDir_;
  session::JobPtr watchJob_;
};

// One line for a job error, e.g. "cannot open: No such file" (the message; kinds other than input prefixed).
QString errorText(const session::JobError& e);

}  // namespace ckptdoc::gui
