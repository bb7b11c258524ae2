#include "universal/output_folder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/io/deferred_sync.h"
#include "deepspeed/output_folder_check.h"
#include "io/writer_lock.h"

namespace fs = std::filesystem;

namespace ckptdoc::universal::detail {
namespace {

void check(int err, const std::string& path, const char* call) {
  if (err != 0) throw Error(ErrorKind::Io, path, "", std::string(call) + ": " + std::strerror(err));
}

}  // namespace

CheckedOutputFolder checked_output(const std::string& output, const std::string& input_save_dir,
                                   const std::string& input_tag_dir, bool force) {
  auto checked = deepspeed::detail::check_output_folder(output, {input_save_dir, input_tag_dir}, force);
  deepspeed::detail::remove_dead_leftovers(checked.path);
  return checked;
}

void make_dir(FileIo& io, const std::string& path) {
  const int err = io.mkdir(path);
  if (err != 0 && err != EEXIST) check(err, path, "mkdir");
}

void publish_folder(const CheckedOutputFolder& output, FileIo& io,
                    const std::function<void(const std::string& dir, FileIo& io)>& write) {
  const std::string& out = output.path;
  const std::string partial = out + ".ckptdoc-partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(partial, ec);
  bool renamed = false;
  try {
    make_dir(io, partial);
    const io::WriterLock claim(partial);  // killed, this folder is removed by the next run at once
    {
      io::DeferredSyncIo deferred(io);
      write(partial, deferred);
      deferred.flush();
    }
    check(io.fsync_dir(partial), partial, "fsync of directory");
    if (output.existed && fs::exists(out, ec)) {  // checked_output allowed it: empty, or --force
      fs::remove_all(out, ec);
      if (ec) throw Error(ErrorKind::Io, out, "", "cannot replace the existing output: " + ec.message());
    }
    if (const int err = io.rename_noreplace(partial, out); err == EEXIST || err == ENOTEMPTY)
      throw Error(
          ErrorKind::OutputExists, out, "",
          "another process published an output here while ckptdoc wrote this one; that output is kept and "
          "this one was not published (run again with another output folder)");
    else
      check(err, out, "rename");
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
