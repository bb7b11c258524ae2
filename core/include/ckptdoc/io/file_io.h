#pragma once
// The file-system calls that writers use, behind one interface so tests can make any of them fail
// (short write, ENOSPC, fsync or rename errors) and check that nothing the user owns is lost.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ckptdoc {

class FileIo {
 public:
  virtual ~FileIo() = default;
  // Each returns 0 on success or an errno value; none throws.
  virtual int open_write(const std::string& path, int* fd) = 0;  // create/truncate, 0644
  virtual int write(int fd, const uint8_t* data, size_t size, size_t* written) = 0;
  virtual int fsync(int fd) = 0;
  virtual int close(int fd) = 0;
  virtual int rename(const std::string& from, const std::string& to) = 0;
  // rename() that fails with EEXIST instead of replacing `to` (renameat2 RENAME_NOREPLACE), so an output
  // never replaces what another writer published meanwhile. The default is the real call.
  virtual int rename_noreplace(const std::string& from, const std::string& to);
  virtual int unlink(const std::string& path) = 0;
  virtual int mkdir(const std::string& path) = 0;  // EEXIST is reported, callers decide
  virtual int fsync_dir(const std::string& path) = 0;
  // Copies `length` bytes from `in_fd` at `in_offset` to `out_fd` at its file position inside the kernel
  // (copy_file_range), setting *copied to the bytes done. ENOSYS (the default), EXDEV, EINVAL or EOPNOTSUPP
  // before any byte was copied mean "not here": callers then write the bytes themselves.
  virtual int copy_range(int in_fd, uint64_t in_offset, int out_fd, size_t length, size_t* copied) {
    (void)in_fd, (void)in_offset, (void)out_fd, (void)length;
    *copied = 0;
    return 38;  // ENOSYS
  }
  // Starts writing [offset, offset + length) of `fd` back to disk without waiting (sync_file_range), so the
  // final fsync of a large file has little left to do. Advisory: the default does nothing.
  virtual void start_writeback(int fd, uint64_t offset, uint64_t length) {
    (void)fd, (void)offset, (void)length;
  }
};

// The real POSIX implementation.
FileIo& posix_io();

// The FileIo used by writers unless one is passed explicitly; tests swap it with ScopedFileIo.
FileIo& current_io();
class ScopedFileIo {
 public:
  explicit ScopedFileIo(FileIo& io);
  ~ScopedFileIo();
  ScopedFileIo(const ScopedFileIo&) = delete;
  ScopedFileIo& operator=(const ScopedFileIo&) = delete;

 private:
  FileIo* previous_;
};

class MappedFile;

// Where bytes go: a file being written, a buffer in memory, or a checksum.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(std::span<const uint8_t> bytes) = 0;
  virtual uint64_t position() const = 0;
  // Writes bytes [offset, offset + length) of a mapped file unchanged. A file sink copies them inside the
  // kernel (they never pass through this process); sinks that pass bytes on forward the call. The default
  // writes the mapped bytes. Throws ckptdoc::Error when the range is outside the file.
  virtual void write_file_range(const MappedFile& file, uint64_t offset, uint64_t length);
};

// Writes the mapped range to `sink` in steps of a few MiB, dropping each step's pages from this process's
// resident set after writing it (they stay in the page cache).
void write_mapped_in_steps(ByteSink& sink, const MappedFile& file, uint64_t offset, uint64_t length);

class VectorSink : public ByteSink {
 public:
  void write(std::span<const uint8_t> bytes) override { data.insert(data.end(), bytes.begin(), bytes.end()); }
  uint64_t position() const override { return data.size(); }
  std::vector<uint8_t> data;
};

// Writes a file atomically: bytes go to "<path>.ckptdoc-tmp-<pid>", then commit() fsyncs, renames it over
// `path` and fsyncs the directory. A `path` absent when the AtomicFile was made is never replaced: when
// another process created it meanwhile, commit() throws and keeps that file. Destroyed without commit(), it
// removes the temp file. Errors throw ckptdoc::Error naming the final path and the failing call (e.g. "write:
// No space left on device"). After a failed write, commit() refuses: the temp file may be missing or
// repeating bytes.
class AtomicFile : public ByteSink {
 public:
  explicit AtomicFile(std::string path, FileIo& io = current_io());
  ~AtomicFile() override;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const uint8_t> bytes) override;
  uint64_t position() const override { return position_; }
  // Large ranges go through FileIo::copy_range (copy_file_range) from the mapped file's own inode; small
  // ones, or where the kernel cannot copy, through the buffer.
  void write_file_range(const MappedFile& file, uint64_t offset, uint64_t length) override;
  void commit();
  const std::string& path() const { return path_; }

 private:
  void flush_buffer();
  void write_all(std::span<const uint8_t> bytes, uint64_t file_offset);
  void maybe_start_writeback();
  int source_fd(const MappedFile& file);  // an fd on the mapped file's inode, or -1
  std::string path_, temp_;
  FileIo& io_;
  int fd_ = -1;
  uint64_t position_ = 0;
  std::vector<uint8_t> buffer_;
  bool committed_ = false;
  bool replaces_ =
      false;  // `path` existed when this was opened (the caller checked it may go); else no-replace
  bool failed_ = false;  // a write failed part way: the temp file is incomplete and must never be committed
  bool kernel_copy_ = true;      // false once copy_range said it cannot copy here
  uint64_t writeback_from_ = 0;  // bytes before this were handed to start_writeback
  struct Source {
    uint64_t device, inode;
    int fd;
  };
  std::vector<Source> sources_;  // a few source fds, most recent last
  uint64_t mapped_changes_ = 0;  // MappedFile::change_count() when opened: commit() refuses if it moved
};

}  // namespace ckptdoc
