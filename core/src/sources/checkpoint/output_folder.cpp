#include "sources/checkpoint/output_folder.h"

#include <cerrno>
#include <cstring>

#include "ckptdoc/error.h"
#include "ckptdoc/io/deferred_sync.h"
#include "io/partial_folder.h"
#include "repair/publish.h"
#include "sources/deepspeed/output_folder_check.h"

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
                    const std::function<void(const std::string& dir, FileIo& io)>& write,
                    const Progress* progress) {
  io::PartialFolder partial(output.path, io);  // removed on failure: nothing half-done stays behind
  {
    io::DeferredSyncIo deferred(io);
    write(partial.path(), deferred);
    deferred.flush();
  }
  check(io.fsync_dir(partial.path()), partial.path(), "fsync of directory");
  // A Cancel that came after the last write's own check (a held or slow last write, the deferred fsyncs):
  // nothing is published.
  if (progress) progress->check();
  // An output --force allowed is moved aside and removed only once the new one is in place (repair's
  // publish).
  bool renamed = false;
  repair::detail::publish_folder(partial.path(), output.path, io, renamed, output.existed);
  partial.keep();
}

}  // namespace ckptdoc::universal::detail
