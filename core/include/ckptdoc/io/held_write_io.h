#pragma once
// TEST SCAFFOLDING, not a feature (like fault_injection.h). A FileIo that passes every call to the real one
// but holds the `hold_at`-th write (or in-kernel copy) made while it is installed (ScopedFileIo) until
// release(): a test or an ImGui script then sees a job part way, with its progress and its Cancel, with no
// timing. Writes after the held one pass; destroyed, it releases a held write. HoldAt::OpenWrite holds the
// `hold_at`-th open for writing instead: a tiny export's first write is its last, with no cancel check after
// it, so holding its first open is the way to see it running with no byte written.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "ckptdoc/io/forwarding_io.h"

namespace ckptdoc {

class HeldWriteIo : public ForwardingFileIo {
 public:
  enum class HoldAt : uint8_t { Write, OpenWrite };
  explicit HeldWriteIo(int hold_at, HoldAt what = HoldAt::Write) : hold_at_(hold_at), what_(what) {}
  ~HeldWriteIo() override { release(); }
  HeldWriteIo(const HeldWriteIo&) = delete;
  HeldWriteIo& operator=(const HeldWriteIo&) = delete;

  bool held() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return holding_;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }

  int open_write(const std::string& path, int* fd) override {
    if (what_ == HoldAt::OpenWrite) gate();
    return ForwardingFileIo::open_write(path, fd);
  }
  int write(int fd, const uint8_t* data, size_t size, size_t* written) override {
    if (what_ == HoldAt::Write) gate();
    return ForwardingFileIo::write(fd, data, size, written);
  }
  int copy_range(int in_fd, uint64_t in_offset, int out_fd, size_t length, size_t* copied) override {
    if (what_ == HoldAt::Write) gate();
    return ForwardingFileIo::copy_range(in_fd, in_offset, out_fd, length, copied);
  }

 private:
  void gate() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (++writes_ != hold_at_) return;
    holding_ = true;
    cv_.wait(lock, [this] { return released_; });
    holding_ = false;
  }
  const int hold_at_;
  const HoldAt what_;
  int writes_ = 0;  // the calls of the kind held, so far
  bool holding_ = false, released_ = false;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace ckptdoc
