#include "sources/deepspeed/universal_folder.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed {

bool is_universal_folder(const std::string& dir) {
  std::error_code ec;
  const fs::path zero = fs::path(dir) / "zero";
  if (!fs::is_directory(zero, ec)) return false;
  if (fs::is_regular_file(zero / "optimizer_state.pt", ec)) return true;
  for (fs::directory_iterator it(zero, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && fs::is_regular_file(it->path() / "fp32.pt", ec)) return true;
  return false;
}

std::string state_file(const std::string& zero_dir, const std::string& param, const std::string& state) {
  return zero_dir + "/" + param + "/" + state + ".pt";
}

}  // namespace ckptdoc::deepspeed
