#include "ckptdoc/io/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/io/mapped_file.h"
#include "io/mapped_pages.h"
#include "io/writer_lock.h"

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
  int copy_range(int in_fd, uint64_t in_offset, int out_fd, size_t length, size_t* copied) override {
    loff_t in = static_cast<loff_t>(in_offset);
    const ssize_t n = ::copy_file_range(in_fd, &in, out_fd, nullptr, length, 0);
    if (n < 0) {
      *copied = 0;
      return errno;
    }
    *copied = static_cast<size_t>(n);
    return 0;
  }
  void start_writeback(int fd, uint64_t offset, uint64_t length) override {
    ::sync_file_range(fd, static_cast<off64_t>(offset), static_cast<off64_t>(length), SYNC_FILE_RANGE_WRITE);
  }
};

constexpr uint64_t kKernelCopyMin = 1 << 20;       // smaller ranges go through the buffer
constexpr uint64_t kWritebackEvery = 64ull << 20;  // start writing back every 64 MiB
constexpr size_t kSourceFds = 8;

std::atomic<FileIo*> g_current{nullptr};

std::string errno_text(const char* call, int err) {
  return std::string(call) + ": " + std::strerror(err);
}

std::string parent_dir(const std::string& path) {
  auto p = std::filesystem::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

}  // namespace

int FileIo::rename_noreplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  const int err = errno;
  if (err != EINVAL && err != ENOSYS) return err;
  // A file system without RENAME_NOREPLACE: a file is linked (which fails if `to` exists) and its old name
  // dropped; a folder falls back to a check right before the rename.
  std::error_code ec;
  if (!std::filesystem::is_directory(from, ec)) {
    if (::link(from.c_str(), to.c_str()) != 0) return errno;
    return ::unlink(from.c_str()) == 0 ? 0 : errno;
  }
  if (std::filesystem::exists(to, ec)) return EEXIST;
  return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

FileIo& posix_io() {
  static PosixIo io;
  return io;
}

FileIo& current_io() {
  FileIo* io = g_current.load();
  return io ? *io : posix_io();
}

ScopedFileIo::ScopedFileIo(FileIo& io) : previous_(g_current.exchange(&io)) {}
ScopedFileIo::~ScopedFileIo() {
  g_current.store(previous_);
}

AtomicFile::AtomicFile(std::string path, FileIo& io)
    : path_(std::move(path)), io_(io), mapped_changes_(MappedFile::change_count()) {
  temp_ = path_ + ".ckptdoc-tmp-" + std::to_string(::getpid());
  // Absent now: commit() will not replace a file another writer creates at `path` meanwhile.
  std::error_code ec;
  replaces_ = std::filesystem::exists(std::filesystem::symlink_status(path_, ec));
  if (const int err = io_.open_write(temp_, &fd_); err != 0) {
    fd_ = -1;
    throw Error(ErrorKind::Io, path_, "", errno_text("open", err));
  }
  io::claim_open_file(fd_);  // a later run removes this temp file at once if this process is killed
  try {
    buffer_.reserve(1 << 20);
  } catch (...) {
    io_.close(fd_);
    io_.unlink(temp_);
    throw;
  }
}

AtomicFile::~AtomicFile() {
  for (const auto& s : sources_) ::close(s.fd);
  if (!committed_) {
    if (fd_ >= 0) io_.close(fd_);
    io_.unlink(temp_);
  }
}

void ByteSink::write_file_range(const MappedFile& file, uint64_t offset, uint64_t length) {
  write_mapped_in_steps(*this, file, offset, length);
}

void write_mapped_in_steps(ByteSink& sink, const MappedFile& file, uint64_t offset, uint64_t length) {
  io::for_each_mapped_step(file, offset, length,
                           [&sink](std::span<const uint8_t> step) { sink.write(step); });
}

int AtomicFile::source_fd(const MappedFile& file) {
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (sources_[i].device == file.device() && sources_[i].inode == file.inode()) {
      std::rotate(sources_.begin() + static_cast<std::ptrdiff_t>(i),
                  sources_.begin() + static_cast<std::ptrdiff_t>(i) + 1, sources_.end());
      return sources_.back().fd;
    }
  }
  const int fd = file.reopen();
  if (fd < 0) return -1;
  if (sources_.size() == kSourceFds) {
    ::close(sources_.front().fd);
    sources_.erase(sources_.begin());
  }
  sources_.push_back({file.device(), file.inode(), fd});
  return fd;
}

void AtomicFile::write_file_range(const MappedFile& file, uint64_t offset, uint64_t length) {
  (void)file.slice(offset, length, "tensor bytes");  // bounds check against the mapping
  if (length < kKernelCopyMin || !kernel_copy_ || committed_ || failed_)
    return write_mapped_in_steps(*this, file, offset, length);
  const int in = source_fd(file);
  if (in < 0) return write_mapped_in_steps(*this, file, offset, length);
  flush_buffer();
  ::posix_fadvise(in, static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_SEQUENTIAL);
  uint64_t done = 0;
  while (done < length) {
    size_t n = 0;
    const int err = io_.copy_range(in, offset + done, fd_, static_cast<size_t>(length - done), &n);
    if (err != 0 && done == 0 &&
        (err == ENOSYS || err == EXDEV || err == EINVAL || err == EOPNOTSUPP || err == EBADF)) {
      kernel_copy_ = false;  // this file system or kernel cannot: write the bytes from now on
      return write_mapped_in_steps(*this, file, offset, length);
    }
    if (err != 0) {
      failed_ = true;
      throw Error(ErrorKind::Io, path_, at_offset(position_ + done), errno_text("copy_file_range", err));
    }
    if (n == 0) {
      failed_ = true;
      throw Error(
          ErrorKind::Truncated, path_, at_offset(position_ + done),
          "copy_file_range: " + file.path() + " ended before byte " + std::to_string(offset + length));
    }
    done += n;
  }
  position_ += length;
  maybe_start_writeback();
}

void AtomicFile::maybe_start_writeback() {
  const uint64_t on_disk = position_ - buffer_.size();
  if (on_disk - writeback_from_ < kWritebackEvery) return;
  io_.start_writeback(fd_, writeback_from_, on_disk - writeback_from_);
  writeback_from_ = on_disk;
}

void AtomicFile::write(std::span<const uint8_t> bytes) {
  if (committed_) throw Error(path_, "", "write after commit");
  if (failed_) throw Error(path_, "", "write after an earlier write failed");
  if (buffer_.size() + bytes.size() > buffer_.capacity()) {
    flush_buffer();
    if (bytes.size() >= buffer_.capacity()) {  // large spans go straight to the file
      write_all(bytes, position_);
      position_ += bytes.size();
      maybe_start_writeback();
      return;
    }
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  position_ += bytes.size();
}

void AtomicFile::flush_buffer() {
  write_all(buffer_, position_ - buffer_.size());
  buffer_.clear();
  maybe_start_writeback();
}

void AtomicFile::write_all(std::span<const uint8_t> bytes, uint64_t file_offset) {
  // A retry after a partial write would repeat the bytes already written, so any failure is final.
  size_t done = 0;
  while (done < bytes.size()) {
    size_t n = 0;
    if (const int err = io_.write(fd_, bytes.data() + done, bytes.size() - done, &n); err != 0) {
      failed_ = true;
      throw Error(ErrorKind::Io, path_, at_offset(file_offset + done), errno_text("write", err));
    }
    if (n == 0) {
      failed_ = true;
      throw Error(ErrorKind::Io, path_, at_offset(file_offset + done), "write: wrote 0 bytes");
    }
    done += n;
  }
}

void AtomicFile::commit() {
  if (committed_) return;
  if (failed_)
    throw Error(ErrorKind::Io, path_, "",
                "cannot commit: an earlier write failed, the temp file is incomplete");
  // A file this output was read from shrank while it was read: the bytes written from it may be zeros.
  if (MappedFile::change_count() != mapped_changes_) {
    failed_ = true;
    MappedFile::throw_changed("writing " + path_);
  }
  flush_buffer();
  if (const int err = io_.fsync(fd_); err != 0) {
    failed_ = true;  // the kernel may have dropped the dirty pages: a second fsync would lie
    throw Error(ErrorKind::Io, path_, "", errno_text("fsync", err));
  }
  const int fd = fd_;
  fd_ = -1;
  if (const int err = io_.close(fd); err != 0)
    throw Error(ErrorKind::Io, path_, "", errno_text("close", err));
  if (const int err = replaces_ ? io_.rename(temp_, path_) : io_.rename_noreplace(temp_, path_); err != 0) {
    failed_ = true;
    if (err == EEXIST)
      throw Error(ErrorKind::OutputExists, path_, "",
                  "another process created this file while ckptdoc wrote it; its file is kept and this "
                  "output was not published");
    throw Error(ErrorKind::Io, path_, "", errno_text("rename", err));
  }
  committed_ = true;
  if (const int err = io_.fsync_dir(parent_dir(path_)); err != 0)
    throw Error(ErrorKind::Io, path_, "", errno_text("fsync of directory", err));
}

}  // namespace ckptdoc
