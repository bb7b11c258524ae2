#include "job_runner.h"

#include <QPointer>
#include <algorithm>
#include <QtConcurrent/QtConcurrentRun>

#include "ckptdoc/error.h"

namespace ckptdoc::gui {

JobRunner::JobRunner(QObject* parent) : QObject(parent) {
  timer_.setInterval(50);
  connect(&timer_, &QTimer::timeout, this, &JobRunner::poll);
}

JobRunner::~JobRunner() {
  if (progress_) progress_->cancel();
  waitForIdle();
}

void JobRunner::waitForIdle() {
  for (auto& f : futures_) f.waitForFinished();
  futures_.clear();
}

int JobRunner::start(const QString& title, Work work, bool keep_result_on_cancel) {
  if (progress_) progress_->cancel();  // the old job becomes stale: its result is dropped
  const int job = ++current_;
  progress_ = std::make_shared<Progress>();
  title_ = title;
  running_ = true;
  QPointer<JobRunner> self(this);
  auto progress = progress_;
  // Drop futures of jobs that already ended so the list stays short.
  futures_.erase(std::remove_if(futures_.begin(), futures_.end(), [](const QFuture<void>& f) { return f.isFinished(); }),
                 futures_.end());
  futures_.append(QtConcurrent::run([self, job, progress, work = std::move(work), keep = keep_result_on_cancel] {
    std::function<void()> deliver;
    QString error;
    bool was_cancelled = false;
    try {
      deliver = work(*progress);
      if (progress->cancelled() && !keep) was_cancelled = true;
    } catch (const Cancelled&) {
      was_cancelled = true;
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
      if (error.isEmpty()) error = QStringLiteral("unknown error");
    } catch (...) {
      error = QStringLiteral("unknown error");
    }
    if (!self) return;
    QMetaObject::invokeMethod(
        self.data(),
        [self, job, deliver = std::move(deliver), error, was_cancelled, keep] {
          if (self) self->complete(job, deliver, error, was_cancelled, keep);
        },
        Qt::QueuedConnection);
  }));
  timer_.start();
  emit started(job, title);
  return job;
}

void JobRunner::cancel() {
  if (!running_ || !progress_) return;
  progress_->cancel();
}

void JobRunner::invalidate() {
  if (progress_) progress_->cancel();
  ++current_;
  running_ = false;
  timer_.stop();
}

void JobRunner::poll() {
  if (!running_ || !progress_) {
    timer_.stop();
    return;
  }
  emit progressed(current_, QString::fromStdString(progress_->stage()), progress_->done(), progress_->total());
}

void JobRunner::complete(int job, std::function<void()> deliver, const QString& error, bool was_cancelled,
                         bool keep) {
  if (job != current_) return;  // stale: a newer job replaced this one
  running_ = false;
  timer_.stop();
  const bool cancelled_now = was_cancelled || (progress_ && progress_->cancelled() && !(keep && deliver));
  if (cancelled_now) {
    emit cancelled(job);
    return;
  }
  if (!error.isEmpty()) {
    emit failed(job, error);
    return;
  }
  if (deliver) deliver();
  emit finished(job);
}

}  // namespace ckptdoc::gui
