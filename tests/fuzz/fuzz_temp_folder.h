#pragma once
// A harness's folder in $TMPDIR, removed when the run ends normally (a crash leaves it beside the crash
// input).
#include <filesystem>
#include <string>
#include <system_error>

namespace ckptdoc::fuzz {

struct TempFolder {
  std::string path;
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace ckptdoc::fuzz
