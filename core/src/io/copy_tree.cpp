#include "io/copy_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/io/fs_error.h"
#include "io/path_relation.h"

namespace ckptdoc::io {
namespace fs = std::filesystem;
namespace {

// Between two cancel checks: a step copies inside the kernel in a fraction of a second.
constexpr size_t kStep = size_t{64} << 20;

class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0)
      : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) throw Error(ErrorKind::Io, path, "", std::string("open: ") + std::strerror(errno));
  }
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// One step of at most `length` bytes from `in` (at `offset`) to `out`: in the kernel where it can, else
// through a buffer. Returns the bytes copied (0: the input ended).
size_t copy_step(int in, uint64_t offset, int out, size_t length, bool& kernel, std::vector<uint8_t>& buffer,
                 const std::string& from, const std::string& to, FileIo& io) {
  if (kernel) {
    size_t n = 0;
    const int err = io.copy_range(in, offset, out, length, &n);
    if (err == 0) return n;
    if (n != 0 || (err != ENOSYS && err != EXDEV && err != EINVAL && err != EOPNOTSUPP))
      throw Error(ErrorKind::Io, to, "", std::string("copy_file_range: ") + std::strerror(err));
    kernel = false;
  }
  buffer.resize(std::min(length, size_t{1} << 20));
  const ssize_t n = ::pread(in, buffer.data(), buffer.size(), static_cast<off_t>(offset));
  if (n < 0) throw Error(ErrorKind::Io, from, "", std::string("read: ") + std::strerror(errno));
  for (size_t done = 0; done < static_cast<size_t>(n);) {
    size_t w = 0;
    if (const int err = io.write(out, buffer.data() + done, static_cast<size_t>(n) - done, &w); err != 0)
      throw Error(ErrorKind::Io, to, "", std::string("write: ") + std::strerror(err));
    done += w;
  }
  return static_cast<size_t>(n);
}

void copy_file(const fs::path& from, const fs::path& to, Progress& progress) {
  FileIo& io = current_io();
  const Fd in(from.string(), O_RDONLY);
  int out = -1;
  if (const int err = io.open_write(to.string(), &out); err != 0)
    throw Error(ErrorKind::Io, to.string(), "", std::string("open: ") + std::strerror(err));
  struct Close {
    FileIo& io;
    int fd;
    ~Close() { io.close(fd); }
  } close{io, out};
  bool kernel = true;
  std::vector<uint8_t> buffer;
  for (uint64_t offset = 0;;) {
    progress.check();
    const size_t n = copy_step(in.get(), offset, out, kStep, kernel, buffer, from.string(), to.string(), io);
    if (n == 0) break;
    offset += n;
    progress.add(n);
  }
  // The input's mode, and writable by its owner: a repair rewrites records of the copy in place, and a
  // read-only input (an archived checkpoint) must not make its copy read-only too.
  fs::permissions(to, fs::status(from).permissions() | fs::perms::owner_write);
}

// A folder's identity, to know it when a link leads to it again.
std::pair<uint64_t, uint64_t> folder_id(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw Error(ErrorKind::Io, dir.string(), "", std::string("stat: ") + std::strerror(errno));
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

// Refuses what the copy cannot hold as a plain file or folder, naming it: a link to nothing, a socket, fifo
// or device, and a link to a folder reached before (a loop, or one folder twice: copying it again could go on
// without end) or to a folder that holds the output (the copy would copy itself). Leaving any of them out
// silently would publish a copy that is not the input.
void check_entry(const fs::directory_entry& e, const std::string& to_normalised,
                 std::map<std::pair<uint64_t, uint64_t>, fs::path>& folders) {
  const fs::path& path = e.path();
  if (e.is_symlink() && !fs::exists(e.status()))
    throw Error(ErrorKind::NotFound, path.string(), "",
                "is a link to " + fs::read_symlink(path).string() +
                    ", which does not exist: the copy would miss it, so nothing was written");
  if (e.is_directory()) {
    const auto [at, first] = folders.emplace(folder_id(path), path);
    if (!first)
      throw Error(ErrorKind::Unsupported, path.string(), "",
                  "is a link to the folder " + at->second.string() +
                      ", which the copy already holds (a link loop, or one folder linked twice): ckptdoc "
                      "copies links as the files they lead to, and copies each folder once, so nothing was "
                      "written");
    if (e.is_symlink() && inside_or_equal(to_normalised, normalised_path(path.string())))
      throw Error(ErrorKind::PathEscape, path.string(), "",
                  "is a link to " + fs::read_symlink(path).string() +
                      ", a folder that holds the output: the copy would copy itself, so nothing was written");
    return;
  }
  if (!e.is_regular_file())
    throw Error(
        ErrorKind::Unsupported, path.string(), "",
        "is neither a file nor a folder (a socket, fifo or device): a checkpoint's copy holds none, so "
        "nothing was written");
}

}  // namespace

void copy_tree(const std::string& from, const std::string& to, Progress* progress, const KeepEntry& keep) {
  Progress none;  // one walk with or without a caller watching, so both write the same copy
  if (!progress) progress = &none;
  try {
    const std::string to_normalised = normalised_path(to);
    // The entries copied, in the walk's order; a top entry `keep` leaves out is not walked into. Links are
    // followed (a Hugging Face cache's snapshot links each file to ../../blobs/): the copy holds their
    // files and folders, written only inside `to`.
    auto walk = [&](const std::function<void(const fs::directory_entry&)>& visit) {
      std::map<std::pair<uint64_t, uint64_t>, fs::path> folders{{folder_id(from), fs::path(from)}};
      fs::recursive_directory_iterator it(from, fs::directory_options::follow_directory_symlink), end;
      for (; it != end; ++it) {
        if (keep && it.depth() == 0 && !keep(*it)) {
          it.disable_recursion_pending();
          continue;
        }
        check_entry(*it, to_normalised, folders);
        visit(*it);
      }
    };
    uint64_t total = 0;
    walk([&](const fs::directory_entry& e) {
      if (e.is_regular_file()) total += e.file_size();
    });
    fs::path name = fs::path(from).lexically_normal();
    if (name.filename().empty()) name = name.parent_path();  // "step-3/"
    progress->set_stage("copying " + name.filename().string(), total);
    // Folders with default permissions: a read-only input still gives a copy the repair can write into.
    fs::create_directories(to);
    walk([&](const fs::directory_entry& e) {
      progress->check();
      const fs::path target = fs::path(to) / e.path().lexically_relative(from);
      if (e.is_directory())
        fs::create_directories(target);
      else if (e.is_regular_file())
        copy_file(e.path(), target, *progress);
    });
  } catch (const fs::filesystem_error& e) {
    throw error_from(e);
  }
}

}  // namespace ckptdoc::io
