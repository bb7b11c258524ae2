// The hooks through which the source registry refuses, in Checkpoint::open, paths another source reads and
// names what other sources read below a folder that holds no checkpoint.
#include "ckptdoc/sources/deepspeed/foreign_paths.h"

#include <mutex>

namespace ckptdoc::deepspeed {
namespace {

struct Installed {
  std::mutex mutex;
  ForeignPathCheck check;
  ForeignBelowSearch below;
};

Installed& installed() {
  static Installed i;
  return i;
}

}  // namespace

void set_foreign_path_check(ForeignPathCheck check) {
  Installed& i = installed();
  const std::lock_guard<std::mutex> lock(i.mutex);
  i.check = std::move(check);
}

void check_not_foreign_path(const std::string& path) {
  ForeignPathCheck check;
  {
    Installed& i = installed();
    const std::lock_guard<std::mutex> lock(i.mutex);
    check = i.check;
  }
  if (check) check(path);
}

void set_foreign_below_search(ForeignBelowSearch search) {
  Installed& i = installed();
  const std::lock_guard<std::mutex> lock(i.mutex);
  i.below = std::move(search);
}

std::vector<ForeignCheckpoint> foreign_checkpoints_below(const std::string& dir) {
  ForeignBelowSearch search;
  {
    Installed& i = installed();
    const std::lock_guard<std::mutex> lock(i.mutex);
    search = i.below;
  }
  return search ? search(dir) : std::vector<ForeignCheckpoint>{};
}

}  // namespace ckptdoc::deepspeed
