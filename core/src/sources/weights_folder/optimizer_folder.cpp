// Which weights folders keep their optimizer in torch.save files beside the weights (see optimizer_folder.h).
#include "optimizer_folder.h"

#include <algorithm>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/weights/optimizer_file.h"
#include "sources/deepspeed/detect.h"

namespace fs = std::filesystem;

namespace ckptdoc::weights_folder {

namespace {

// A weights file the catalog reads as the folder's model, and none of DeepSpeed's save-folder entries.
bool weights_without_deepspeed(const fs::path& dir) {
  std::error_code ec;
  bool weights = false;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == "latest" || name == "latest_universal" || name.rfind("global_step", 0) == 0) return false;
    if (it->is_regular_file(ec) && deepspeed::detail::hugging_face_weights_name(name)) weights = true;
  }
  return !ec && weights;
}

}  // namespace

bool is_optimizer_folder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return false;
  return !weights::optimizer_files_in(path).empty() && weights_without_deepspeed(path);
}

OptimizerFolder read_optimizer_folder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw Error(ErrorKind::NotFound, path, "", "no such folder");
  if (!is_optimizer_folder(path))
    throw Error(ErrorKind::Unsupported, path, "",
                "is not a weights folder with its optimizer beside it (optimizer.pt, optimizer.bin)");
  OptimizerFolder f;
  f.dir = fs::absolute(path, ec).lexically_normal().string();
  while (f.dir.size() > 1 && f.dir.back() == '/') f.dir.pop_back();
  f.optimizer_files = weights::optimizer_files_in(f.dir);
  // The Trainer names its file optimizer.pt; Accelerate's save_state writes optimizer.bin /
  // optimizer_<i>.bin.
  const bool trainer = std::find(f.optimizer_files.begin(), f.optimizer_files.end(), "optimizer.pt") !=
                       f.optimizer_files.end();
  if (trainer && f.optimizer_files.size() > 1)
    throw Error(ErrorKind::Unsupported, f.dir, "",
                "holds both the Trainer's optimizer.pt and Accelerate's optimizer*.bin: repair a folder one "
                "framework wrote");
  f.framework = trainer ? Framework::Trainer : Framework::Accelerate;
  return f;
}

}  // namespace ckptdoc::weights_folder
