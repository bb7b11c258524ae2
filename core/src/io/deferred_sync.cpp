#include "ckptdoc/io/deferred_sync.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ckptdoc/error.h"
#include "ckptdoc/parallel.h"

namespace ckptdoc::io {
namespace {

constexpr size_t kBatch = 128;  // kept files (and fds) before a batch is made durable

// Runs work(i) for i in [0, n) on up to `threads` threads of the shared pool: fsyncs wait on the disk, not
// the CPU, so the caller asks for more threads than cores.
template <class Work>
void run_parallel(size_t n, unsigned threads, Work work) {
  parallel_for(n, std::max(threads, 1u), [&](size_t i, unsigned) { work(i); });
}

}  // namespace

DeferredSyncIo::~DeferredSyncIo() {
  for (const auto& k : kept_) inner_.close(k.fd);
}

int DeferredSyncIo::open_write(const std::string& path, int* fd) {
  const int err = inner_.open_write(path, fd);
  if (err == 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_[*fd] = path;
  }
  return err;
}

int DeferredSyncIo::write(int fd, const uint8_t* data, size_t size, size_t* written) {
  return inner_.write(fd, data, size, written);
}

int DeferredSyncIo::fsync(int fd) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!open_.count(fd)) return inner_.fsync(fd);  // not opened here
    fsynced_.insert(fd);
  }
  inner_.start_writeback(fd, 0, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  return 0;
}

int DeferredSyncIo::close(int fd) {
  std::vector<Kept> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = open_.find(fd);
    if (it == open_.end() || !fsynced_.erase(fd)) {
      if (it != open_.end()) open_.erase(it);
      return inner_.close(fd);
    }
    kept_.push_back({fd, it->second});
    open_.erase(it);
    if (kept_.size() >= kBatch) batch.swap(kept_);
  }
  if (!batch.empty()) sync_batch(std::move(batch));
  return 0;
}

int DeferredSyncIo::rename(const std::string& from, const std::string& to) {
  const int err = inner_.rename(from, to);
  if (err == 0) follow_rename(from, to);
  return err;
}

int DeferredSyncIo::rename_noreplace(const std::string& from, const std::string& to) {
  const int err = inner_.rename_noreplace(from, to);
  if (err == 0) follow_rename(from, to);
  return err;
}

void DeferredSyncIo::follow_rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& k : kept_)
    if (k.path == from) k.path = to;
}

int DeferredSyncIo::unlink(const std::string& path) {
  return inner_.unlink(path);
}

int DeferredSyncIo::mkdir(const std::string& path) {
  return inner_.mkdir(path);
}

int DeferredSyncIo::fsync_dir(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  dirs_.insert(path);
  return 0;
}

int DeferredSyncIo::copy_range(int in_fd, uint64_t in_offset, int out_fd, size_t length, size_t* copied) {
  return inner_.copy_range(in_fd, in_offset, out_fd, length, copied);
}

void DeferredSyncIo::start_writeback(int fd, uint64_t offset, uint64_t length) {
  inner_.start_writeback(fd, offset, length);
}

void DeferredSyncIo::record_failure(const std::string& path, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.empty()) failed_path_ = path, failure_ = why;
}

void DeferredSyncIo::sync_batch(std::vector<Kept> batch) {
  run_parallel(batch.size(), threads_, [&](size_t i) {
    if (const int err = inner_.fsync(batch[i].fd); err != 0)
      record_failure(batch[i].path, std::string("fsync: ") + std::strerror(err));
    if (const int err = inner_.close(batch[i].fd); err != 0)
      record_failure(batch[i].path, std::string("close: ") + std::strerror(err));
  });
}

void DeferredSyncIo::flush() {
  std::vector<Kept> batch;
  std::vector<std::string> dirs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(kept_);
    dirs.assign(dirs_.begin(), dirs_.end());
    dirs_.clear();
  }
  sync_batch(std::move(batch));
  run_parallel(dirs.size(), threads_, [&](size_t i) {
    if (const int err = inner_.fsync_dir(dirs[i]); err != 0)
      record_failure(dirs[i], std::string("fsync of directory: ") + std::strerror(err));
  });
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_.empty()) throw Error(ErrorKind::Io, failed_path_, "", failure_);
}

}  // namespace ckptdoc::io
