#include "io/writer_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>

namespace ckptdoc::io {
namespace {

// File systems of one machine (statfs magic numbers): an flock there is seen by every process of every
// container that mounts it. Anything else (NFS, SMB, Lustre, GPFS, FUSE, ...) may be shared with other hosts.
bool is_local_file_system(const std::string& path) {
  struct statfs s {};
  if (::statfs(path.c_str(), &s) != 0) return false;
  switch (static_cast<uint64_t>(s.f_type)) {
    case 0xEF53:      // ext2/3/4
    case 0x58465342:  // XFS
    case 0x9123683E:  // btrfs
    case 0x01021994:  // tmpfs
    case 0x858458F6:  // ramfs
    case 0x794C7630:  // overlayfs
    case 0x2FC12FC1:  // ZFS
    case 0xF2F52010:  // F2FS
    case 0xCA451A4E:  // bcachefs
      return true;
    default:
      return false;
  }
}

}  // namespace

WriterLock::WriterLock(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) ::close(fd_);
}

void claim_open_file(int fd) {
  if (fd >= 0) (void)::flock(fd, LOCK_EX | LOCK_NB);
}

bool provably_abandoned(const std::string& path) {
  if (!is_local_file_system(path)) return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

}  // namespace ckptdoc::io
