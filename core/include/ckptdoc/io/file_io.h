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
  virtual int unlink(const std::string& path) = 0;
  virtual int mkdir(const std::string& path) = 0;  // EEXIST is reported, callers decide
  virtual int fsync_dir(const std::string& path) = 0;
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

// Where bytes go: a file being written, a buffer in memory, or a checksum.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(std::span<const uint8_t> bytes) = 0;
  virtual uint64_t position() const = 0;
};

class VectorSink : public ByteSink {
 public:
  void write(std::span<const uint8_t> bytes) override { data.insert(data.end(), bytes.begin(), bytes.end()); }
  uint64_t position() const override { return data.size(); }
  std::vector<uint8_t> data;
};

// Writes a file atomically: bytes go to "<path>.ckptdoc-tmp-<pid>", then commit() fsyncs, renames it over
// `path` and fsyncs the directory. Destroyed without commit(), it removes the temp file. Errors throw
// ckptdoc::Error naming the final path and the failing call (e.g. "write: No space left on device"). After a
// failed write, commit() refuses: the temp file may be missing or repeating bytes.
class AtomicFile : public ByteSink {
 public:
  explicit AtomicFile(std::string path, FileIo& io = current_io());
  ~AtomicFile() override;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const uint8_t> bytes) override;
  uint64_t position() const override { return position_; }
  void commit();
  const std::string& path() const { return path_; }

 private:
  void flush_buffer();
  void write_all(std::span<const uint8_t> bytes, uint64_t file_offset);
  std::string path_, temp_;
  FileIo& io_;
  int fd_ = -1;
  uint64_t position_ = 0;
  std::vector<uint8_t> buffer_;
  bool committed_ = false;
  bool failed_ = false;  // a write failed part way: the temp file is incomplete and must never be committed
  uint64_t mapped_changes_ = 0;  // MappedFile::change_count() when opened: commit() refuses if it moved
};

}  // namespace ckptdoc
