#pragma once
// A FileIo for tests of a session job that writes files (#28): the real file calls, each write (or in-kernel
// copy) first noting the job's stage and progress, so a test sees the progress as the output is written with
// no timing; with `cancel_at`, the job is asked to cancel at that write of a stage, or with
// cancel_when_starts() as a stage starts (for a stage that makes no writes, such as a repair's check of its
// copy).
#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "ckptdoc/io/forwarding_io.h"
#include "ckptdoc/session/job.h"

namespace ckptdoc::test {

// The real file calls, each write (or in-kernel copy) first noting the job's progress; with `cancel_at`, the
// job is asked to cancel at that write. The job is known once export_source/repair_source returned: a write
// before then waits for it.
class JobWatchingIo : public ForwardingFileIo {
 public:
  struct Sample {
    std::string stage;
    uint64_t done = 0, total = 0;
  };
  // With `cancel_at` > 0, the job is asked to cancel at the cancel_at-th write made in a stage starting
  // with `stage`.
  explicit JobWatchingIo(int cancel_at = -1, std::string stage = {})
      : cancel_at_(cancel_at), stage_(std::move(stage)), job_(promise_.get_future().share()) {}
  // The job is asked to cancel as the stage named `stage` starts (Progress::on_stage); call before set_job.
  void cancel_when_starts(std::string stage) { cancel_stage_ = std::move(stage); }
  bool cancelled_at_stage() const { return cancelled_at_stage_.load(); }
  // The job is asked to cancel at the first directory fsync: once its output is written, before it is
  // published.
  void cancel_at_first_dir_sync() { cancel_at_dir_sync_ = true; }
  bool cancelled_at_dir_sync() const { return cancelled_at_dir_sync_.load(); }
  // Installs the stage hook (when asked for) before releasing the writes that wait for the job: the work
  // cannot reach a later stage before the hook is in place.
  void set_job(const session::JobPtr& job) {
    if (!cancel_stage_.empty())
      job->progress().on_stage([this, raw = job.get()](const std::string& stage) {
        if (stage != cancel_stage_) return;
        cancelled_at_stage_ = true;
        raw->cancel();
      });
    promise_.set_value(job);
  }
  std::vector<Sample> samples() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return samples_;
  }

  int write(int fd, const uint8_t* data, size_t size, size_t* written) override {
    note();
    return ForwardingFileIo::write(fd, data, size, written);
  }
  int copy_range(int in_fd, uint64_t in_offset, int out_fd, size_t length, size_t* copied) override {
    note();
    return ForwardingFileIo::copy_range(in_fd, in_offset, out_fd, length, copied);
  }
  int fsync_dir(const std::string& path) override {
    if (cancel_at_dir_sync_ && !cancelled_at_dir_sync_.exchange(true)) job_.get()->cancel();
    return ForwardingFileIo::fsync_dir(path);
  }

 private:
  void note() {
    const session::JobPtr job = job_.get();
    std::lock_guard<std::mutex> lock(mutex_);
    samples_.push_back({job->stage(), job->done(), job->total()});
    if (samples_.back().stage.rfind(stage_, 0) == 0 && ++in_stage_ == cancel_at_) job->cancel();
  }
  const int cancel_at_;
  const std::string stage_;
  std::string cancel_stage_;
  std::atomic<bool> cancelled_at_stage_{false};
  bool cancel_at_dir_sync_ = false;
  std::atomic<bool> cancelled_at_dir_sync_{false};
  int in_stage_ = 0;
  std::promise<session::JobPtr> promise_;
  std::shared_future<session::JobPtr> job_;
  mutable std::mutex mutex_;
  std::vector<Sample> samples_;
};

}  // namespace ckptdoc::test
