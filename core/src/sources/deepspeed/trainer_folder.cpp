// The Trainer's own files in a checkpoint-N/ folder (see trainer_folder.h).
#include "sources/deepspeed/trainer_folder.h"

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed {

std::vector<std::string> trainer_folder_files(const std::string& save_dir) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(save_dir) / "trainer_state.json", ec)) return {};
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(save_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file(ec) || name == "latest" || name == "zero_to_fp32.py" || name == "zero_to_torch.py")
      continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ckptdoc::deepspeed
