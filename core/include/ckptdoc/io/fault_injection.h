#pragma once
// TEST SCAFFOLDING, not a feature. A FileIo that fails on purpose: the N-th call (of the kinds selected)
// returns an errno or kills the process, so tests can prove that writers lose nothing and leave no partial
// output. Only tests construct it; the CLI installs it from CKPTDOC_FAULT only in CKPTDOC_TEST_HOOKS builds.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ckptdoc/io/file_io.h"

namespace ckptdoc {

struct FaultPlan {
  enum class Action : uint8_t { Fail, Kill } action = Action::Fail;
  uint64_t at_call = 0;       // 1-based index of the call that fails (counting only matching calls)
  std::string calls = "any";  // "any" or one of: open, write, fsync, close, rename, unlink, mkdir, fsync_dir
  int error = 28;             // errno to return (28 = ENOSPC)
  bool short_write = false;   // for writes: write half the bytes, then fail the next
  // Parses "kill@17", "fail@3:write:ENOSPC", "fail@1:rename:EIO" ; nullopt when malformed.
  static std::optional<FaultPlan> parse(const std::string& spec);
};

class FaultyIo : public FileIo {
 public:
  FaultyIo(FileIo& inner, FaultPlan plan) : inner_(inner), plan_(std::move(plan)) {}
  int open_write(const std::string& path, int* fd) override;
  int write(int fd, const uint8_t* data, size_t size, size_t* written) override;
  int fsync(int fd) override;
  int close(int fd) override;
  int rename(const std::string& from, const std::string& to) override;
  int rename_noreplace(const std::string& from, const std::string& to) override;
  int unlink(const std::string& path) override;
  int mkdir(const std::string& path) override;
  int fsync_dir(const std::string& path) override;
  uint64_t calls() const { return count_.load(); }
  bool fired() const { return fired_.load(); }

 private:
  // Returns the errno to inject for this call (0 = pass through); kills the process for Kill plans.
  int inject(const char* call);
  FileIo& inner_;
  FaultPlan plan_;
  std::atomic<uint64_t> count_{0};
  std::atomic<bool> fired_{false};
};

// Test scaffolding: called with a mapped file's path each time it is touched (MappedFile::open has just
// mapped it, or a reader takes a range of it with slice()), from any thread, so a test can change the file at
// a chosen moment instead of racing the reader. Empty = none (the default).
void set_file_touch_hook(std::function<void(const std::string& path)> hook);

// Test scaffolding: when CKPTDOC_CUT_FILE is "NAME:BYTES:N", the N-th touch (see above) of a file whose path
// ends in NAME truncates it to BYTES (a save still running, as seen by the reader). Returns a description (or
// why a malformed value was ignored), or "" when not set.
std::string install_file_cut_from_env();

// Test scaffolding: when the environment variable CKPTDOC_FAULT is set, installs a FaultyIo as the current
// FileIo for the life of the process. Returns a description, or "" when not set.
std::string install_fault_injection_from_env();

}  // namespace ckptdoc
