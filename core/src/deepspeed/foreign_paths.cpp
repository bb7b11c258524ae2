// The hook through which the source registry refuses, in Checkpoint::open, paths another source reads.
#include "ckptdoc/deepspeed/foreign_paths.h"

#include <mutex>

namespace ckptdoc::deepspeed {
namespace {

struct Installed {
  std::mutex mutex;
  ForeignPathCheck check;
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

}  // namespace ckptdoc::deepspeed
