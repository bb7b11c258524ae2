#include "universal/output_folder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/io/deferred_sync.h"
#include "io/path_relation.h"

namespace fs = std::filesystem;

namespace ckptdoc::universal::detail {
namespace {

void check(int err, const std::string& path, const char* call) {
  if (err != 0) throw Error(path, "", std::string(call) + ": " + std::strerror(err));
}

}  // namespace

std::string checked_output(const std::string& output, const std::string& input_save_dir,
                           const std::string& input_tag_dir, bool force) {
  if (output.empty()) throw Error("", "--output", "an output folder is required");
  const std::string out = io::normalised_path(output), save = io::normalised_path(input_save_dir),
                    tag = io::normalised_path(input_tag_dir);
  if (io::inside_or_equal(out, save) || io::inside_or_equal(out, tag))
    throw Error("", "--output",
                "the output " + out + " is inside the input checkpoint " + save +
                    "; choose a new folder elsewhere (the input is never modified)");
  if (io::inside_or_equal(save, out) || io::inside_or_equal(tag, out))
    throw Error("", "--output", "the output " + out + " contains the input checkpoint; choose a new folder");
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) throw Error("", "--output", out + " exists and is not a folder");
    if (!fs::is_empty(out, ec) && !force)
      throw Error("", "--output", out + " exists and is not empty (pass --force to replace it)");
  }
  return out;
}

void make_dir(FileIo& io, const std::string& path) {
  const int err = io.mkdir(path);
  if (err != 0 && err != EEXIST) check(err, path, "mkdir");
}

void publish_folder(const std::string& out, FileIo& io,
                    const std::function<void(const std::string& dir, FileIo& io)>& write) {
  const std::string partial = out + ".ckptdoc-partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(partial, ec);
  bool renamed = false;
  try {
    make_dir(io, partial);
    {
      io::DeferredSyncIo deferred(io);
      write(partial, deferred);
      deferred.flush();
    }
    check(io.fsync_dir(partial), partial, "fsync of directory");
    if (fs::exists(out, ec)) {  // checked_output allowed it: empty, or --force
      fs::remove_all(out, ec);
      if (ec) throw Error(out, "", "cannot replace the existing output: " + ec.message());
    }
    check(io.rename(partial, out), out, "rename");
    renamed = true;
    const fs::path parent = fs::path(out).parent_path();
    check(io.fsync_dir(parent.empty() ? std::string(".") : parent.string()), parent.string(),
          "fsync of directory");
  } catch (...) {
    fs::remove_all(renamed ? out : partial, ec);  // nothing half-done stays behind
    throw;
  }
}

}  // namespace ckptdoc::universal::detail
