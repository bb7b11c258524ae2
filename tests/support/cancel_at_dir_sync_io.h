#pragma once
// A FileIo that cancels `progress` at the first directory fsync: once every file of a writer's output is
// written, before the output is published. A writer must then throw Cancelled and publish nothing. With
// `name_part`, at the first fsync of a folder whose name holds it (".ckptdoc-partial-": the output's partial
// folder itself, for a writer that also syncs its subfolders or each file's folder as it goes).
#include <filesystem>
#include <string>
#include <utility>

#include "ckptdoc/io/forwarding_io.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::test {

struct CancelAtDirSyncIo : ForwardingFileIo {
  explicit CancelAtDirSyncIo(Progress& p, std::string part = {}) : progress(p), name_part(std::move(part)) {}
  int fsync_dir(const std::string& path) override {
    if (!cancelled && std::filesystem::path(path).filename().string().find(name_part) != std::string::npos) {
      progress.cancel();
      cancelled = true;
    }
    return ForwardingFileIo::fsync_dir(path);
  }
  Progress& progress;
  const std::string name_part;
  bool cancelled = false;
};

}  // namespace ckptdoc::test
