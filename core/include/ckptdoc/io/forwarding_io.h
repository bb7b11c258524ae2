#pragma once
// A FileIo that passes every call to the real one (posix_io()): the base of the wrappers that watch or hold
// some calls and forward the rest unchanged (held_write_io.h, tests/support/job_watching_io.h), so each
// overrides only what it watches.
#include "ckptdoc/io/file_io.h"

namespace ckptdoc {

class ForwardingFileIo : public FileIo {
 public:
  int open_write(const std::string& path, int* fd) override { return real().open_write(path, fd); }
  int write(int fd, const uint8_t* data, size_t size, size_t* written) override {
    return real().write(fd, data, size, written);
  }
  int fsync(int fd) override { return real().fsync(fd); }
  int close(int fd) override { return real().close(fd); }
  int rename(const std::string& from, const std::string& to) override { return real().rename(from, to); }
  int rename_noreplace(const std::string& from, const std::string& to) override {
    return real().rename_noreplace(from, to);
  }
  int unlink(const std::string& path) override { return real().unlink(path); }
  int mkdir(const std::string& path) override { return real().mkdir(path); }
  int fsync_dir(const std::string& path) override { return real().fsync_dir(path); }
  int copy_range(int in_fd, uint64_t in_offset, int out_fd, size_t length, size_t* copied) override {
    return real().copy_range(in_fd, in_offset, out_fd, length, copied);
  }
  void start_writeback(int fd, uint64_t offset, uint64_t length) override {
    real().start_writeback(fd, offset, length);
  }

 protected:
  static FileIo& real() { return posix_io(); }
};

}  // namespace ckptdoc
