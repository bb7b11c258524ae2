#pragma once
// Runs one kind of background work at a time on Qt's thread pool, the way Hotspot's job tracker does: each
// start() bumps a job id and cancels the previous job, so a superseded result is dropped instead of drawn.
// Progress comes from core's Progress atomics, polled on a timer; results reach the UI thread queued.
#include <QObject>
#include <QFuture>
#include <QString>
#include <QTimer>
#include <functional>
#include <memory>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::gui {

class JobRunner : public QObject {
  Q_OBJECT
 public:
  // Work runs on a worker thread and returns the closure that delivers its result on the UI thread.
  using Work = std::function<std::function<void()>(Progress&)>;

  explicit JobRunner(QObject* parent = nullptr);
  ~JobRunner() override;

  // keep_result_on_cancel: work that returns after a cancel reached a state worth telling (a repair whose output
  // is already in place) is delivered, not dropped; only work that threw Cancelled ends as cancelled().
  int start(const QString& title, Work work, bool keep_result_on_cancel = false);
  // Typed convenience: `work` computes a T on the worker, `done` consumes it on the UI thread.
  template <typename T>
  int run(const QString& title, std::function<T(Progress&)> work, std::function<void(T&)> done,
          bool keep_result_on_cancel = false) {
    return start(
        title,
        [work = std::move(work), done = std::move(done)](Progress& p) {
          auto result = std::make_shared<T>(work(p));
          return std::function<void()>([result, done] { done(*result); });
        },
        keep_result_on_cancel);
  }

  void cancel();      // asks the running job to stop; its result (if any) is dropped, cancelled() follows
  void invalidate();  // drops the running job silently (no signal), e.g. when its input went away
  bool running() const { return running_; }
  int currentJob() const { return current_; }
  QString title() const { return title_; }
  void waitForIdle();  // blocks until no worker runs (for shutdown and tests)

 signals:
  void started(int job, const QString& title);
  void progressed(int job, const QString& stage, quint64 done, quint64 total);
  void finished(int job);
  void failed(int job, const QString& message);
  void cancelled(int job);

 private:
  void poll();
  void complete(int job, std::function<void()> deliver, const QString& error, bool was_cancelled, bool keep);

  int current_ = 0;
  bool running_ = false;
  QString title_;
  std::shared_ptr<Progress> progress_;
  QTimer timer_;
  QList<QFuture<void>> futures_;
};

}  // namespace ckptdoc::gui
