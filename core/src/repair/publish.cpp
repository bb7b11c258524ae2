// publish_folder (see publish.h): shared by the single-process and the MPI repair, the DCP rewrites and the
// snapshot conversion.
#include "repair/publish.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {

void check_io(int err, const std::string& path, const char* call) {
  if (err != 0 && !(err == EEXIST && std::string(call) == "mkdir"))
    throw Error(ErrorKind::Io, path, "", std::string(call) + ": " + std::strerror(err));
}

void remove_tree_quietly(const std::string& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

void publish_folder(const std::string& partial, const std::string& out, FileIo& io, bool& renamed,
                    bool replace_existing, std::string* kept_aside) {
  // make_plan allowed an existing output (empty, or a checkpoint under --force). It is moved aside first and
  // removed only once the new one is in place, so a failure here leaves it whole.
  std::error_code ec;
  std::string aside;
  if (replace_existing && fs::exists(out, ec)) {
    aside = out + ".ckptdoc-replaced-" + std::to_string(::getpid());
    remove_tree_quietly(aside);
    check_io(io.rename(out, aside), out, "rename (moving the output being replaced aside)");
  }
  if (const int err = io.rename_noreplace(partial, out); err != 0) {
    if (!aside.empty()) io.rename(aside, out);
    if (err == EEXIST || err == ENOTEMPTY)
      throw Error(
          ErrorKind::OutputExists, out, "",
          "another process published an output here while ckptdoc wrote this one; that output is kept and "
          "this one was not published (run again with another output folder)");
    check_io(err, out, "rename");
  }
  fs::path parent = fs::path(out).parent_path();
  if (const int err = io.fsync_dir(parent.empty() ? std::string(".") : parent.string()); err != 0) {
    // Whether the rename is durable is unknown: no output of unknown durability stays, the old one comes
    // back.
    remove_tree_quietly(out);
    if (!aside.empty()) io.rename(aside, out);
    check_io(err, parent.string(), "fsync of directory");
  }
  renamed = true;
  if (kept_aside)
    *kept_aside = aside;
  else if (!aside.empty())
    remove_tree_quietly(aside);
}

void undo_publish(const std::string& out, const std::string& kept_aside, FileIo& io) {
  remove_tree_quietly(out);
  if (!kept_aside.empty()) io.rename(kept_aside, out);
  const fs::path parent = fs::path(out).parent_path();
  io.fsync_dir(parent.empty() ? std::string(".") : parent.string());
}

}  // namespace ckptdoc::repair::detail
