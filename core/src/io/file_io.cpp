#include "ckptdoc/io/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc {
namespace {

class PosixIo : public FileIo {
 public:
  int open_write(const std::string& path, int* fd) override {
    *fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return *fd < 0 ? errno : 0;
  }
  int write(int fd, const uint8_t* data, size_t size, size_t* written) override {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      *written = 0;
      return errno;
    }
    *written = static_cast<size_t>(n);
    return 0;
  }
  int fsync(int fd) override { return ::fsync(fd) == 0 ? 0 : errno; }
  int close(int fd) override { return ::close(fd) == 0 ? 0 : errno; }
  int rename(const std::string& from, const std::string& to) override {
    return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
  }
  int unlink(const std::string& path) override { return ::unlink(path.c_str()) == 0 ? 0 : errno; }
  int mkdir(const std::string& path) override { return ::mkdir(path.c_str(), 0755) == 0 ? 0 : errno; }
  int fsync_dir(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    const int rc = ::fsync(fd) == 0 ? 0 : errno;
    ::close(fd);
    return rc;
  }
};

std::atomic<FileIo*> g_current{nullptr};

std::string errno_text(const char* call, int err) { return std::string(call) + ": " + std::strerror(err); }

std::string parent_dir(const std::string& path) {
  auto p = std::filesystem::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

}  // namespace

FileIo& posix_io() {
  static PosixIo io;
  return io;
}

FileIo& current_io() {
  FileIo* io = g_current.load();
  return io ? *io : posix_io();
}

ScopedFileIo::ScopedFileIo(FileIo& io) : previous_(g_current.exchange(&io)) {}
ScopedFileIo::~ScopedFileIo() { g_current.store(previous_); }

AtomicFile::AtomicFile(std::string path, FileIo& io)
    : path_(std::move(path)), io_(io), mapped_changes_(MappedFile::change_count()) {
  temp_ = path_ + ".ckptdoc-tmp-" + std::to_string(::getpid());
  if (const int err = io_.open_write(temp_, &fd_); err != 0) {
    fd_ = -1;
    throw Error(path_, "", errno_text("open", err));
  }
  try {
    buffer_.reserve(1 << 20);
  } catch (...) {
    io_.close(fd_);
    io_.unlink(temp_);
    throw;
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    if (fd_ >= 0) io_.close(fd_);
    io_.unlink(temp_);
  }
}

void AtomicFile::write(std::span<const uint8_t> bytes) {
  if (committed_) throw Error(path_, "", "write after commit");
  if (failed_) throw Error(path_, "", "write after an earlier write failed");
  if (buffer_.size() + bytes.size() > buffer_.capacity()) {
    flush_buffer();
    if (bytes.size() >= buffer_.capacity()) {  // large spans go straight to the file
      write_all(bytes, position_);
      position_ += bytes.size();
      return;
    }
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  position_ += bytes.size();
}

void AtomicFile::flush_buffer() {
  write_all(buffer_, position_ - buffer_.size());
  buffer_.clear();
}

void AtomicFile::write_all(std::span<const uint8_t> bytes, uint64_t file_offset) {
  // A retry after a partial write would repeat the bytes already written, so any failure is final.
  size_t done = 0;
  while (done < bytes.size()) {
    size_t n = 0;
    if (const int err = io_.write(fd_, bytes.data() + done, bytes.size() - done, &n); err != 0) {
      failed_ = true;
      throw Error(path_, at_offset(file_offset + done), errno_text("write", err));
    }
    if (n == 0) {
      failed_ = true;
      throw Error(path_, at_offset(file_offset + done), "write: wrote 0 bytes");
    }
    done += n;
  }
}

void AtomicFile::commit() {
  if (committed_) return;
  if (failed_) throw Error(path_, "", "cannot commit: an earlier write failed, the temp file is incomplete");
  // A file this output was read from shrank while it was read: the bytes written from it may be zeros.
  if (MappedFile::change_count() != mapped_changes_) {
    failed_ = true;
    MappedFile::throw_changed("writing " + path_);
  }
  flush_buffer();
  if (const int err = io_.fsync(fd_); err != 0) {
    failed_ = true;  // the kernel may have dropped the dirty pages: a second fsync would lie
    throw Error(path_, "", errno_text("fsync", err));
  }
  const int fd = fd_;
  fd_ = -1;
  if (const int err = io_.close(fd); err != 0) throw Error(path_, "", errno_text("close", err));
  if (const int err = io_.rename(temp_, path_); err != 0) throw Error(path_, "", errno_text("rename", err));
  committed_ = true;
  if (const int err = io_.fsync_dir(parent_dir(path_)); err != 0)
    throw Error(path_, "", errno_text("fsync of directory", err));
}

}  // namespace ckptdoc
