#pragma once
// A writer's claim on its temporary file or partial folder (an flock held while it writes), so that a later
// run can tell a killed writer's leftover from a live one's at once, instead of waiting for the leftover to
// age.
#include <string>

namespace ckptdoc::io {

class WriterLock {
 public:
  WriterLock() = default;
  // Best effort: a path that cannot be opened or locked leaves no claim (the leftover then waits to age).
  explicit WriterLock(const std::string& path);
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock();

 private:
  int fd_ = -1;
};

// Claims an already open file descriptor (an AtomicFile's temp file) for as long as it stays open.
void claim_open_file(int fd);

// True when `path` lies on a local file system, where every process that can reach it sees the same flocks,
// and no process holds a claim on it: its writer is gone, however recently it wrote. False on network file
// systems (another host's writer may hold a claim this host cannot see) and when the claim is held.
bool provably_abandoned(const std::string& path);

}  // namespace ckptdoc::io
