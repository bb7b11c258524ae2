#pragma once
// A FileIo for outputs published as a whole folder (written under a temporary name, renamed into place once
// complete): the files inside need not be durable one by one, only all of them before the rename. An fsync
// starts writeback and keeps the file open; the kept files are made durable a batch at a time, several in
// flight, so the file system commits its journal a few times instead of twice per file. The fds stay open
// until their fsync so that a writeback error is reported to them (Linux reports it only to descriptors
// open when it happened).
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ckptdoc/io/file_io.h"

namespace ckptdoc::io {

class DeferredSyncIo : public FileIo {
 public:
  explicit DeferredSyncIo(FileIo& inner, unsigned threads = 8) : inner_(inner), threads_(threads) {}
  ~DeferredSyncIo() override;  // closes what flush() did not
  int open_write(const std::string& path, int* fd) override;
  int write(int fd, const uint8_t* data, size_t size, size_t* written) override;
  int fsync(int fd) override;  // writeback started, the file kept open for flush()
  int close(int fd) override;  // a file kept for flush() is closed there
  int rename(const std::string& from, const std::string& to) override;
  int rename_noreplace(const std::string& from, const std::string& to) override;
  int unlink(const std::string& path) override;
  int mkdir(const std::string& path) override;
  int fsync_dir(const std::string& path) override;  // recorded; made durable by flush()
  int copy_range(int in_fd, uint64_t in_offset, int out_fd, size_t length, size_t* copied) override;
  void start_writeback(int fd, uint64_t offset, uint64_t length) override;

  // fsyncs and closes every kept file, then fsyncs every recorded folder, through the inner FileIo. Throws
  // ckptdoc::Error naming the first file or folder that failed, here or in an earlier batch.
  void flush();

 private:
  void follow_rename(const std::string& from, const std::string& to);  // kept files keep their new name
  struct Kept {
    int fd;
    std::string path;  // its name now (renames are followed)
  };
  void sync_batch(std::vector<Kept> batch);
  void record_failure(const std::string& path, const std::string& why);

  FileIo& inner_;
  unsigned threads_;
  std::mutex mutex_;
  std::unordered_map<int, std::string> open_;  // fd -> path of files written through this
  std::unordered_set<int> fsynced_;            // open fds whose fsync was deferred
  std::vector<Kept> kept_;                     // closed by the writer, waiting for flush()
  std::unordered_set<std::string> dirs_;
  std::string failed_path_, failure_;
};

}  // namespace ckptdoc::io
