// repair --drop-optimizer of an Accelerate save_state folder (see drop_optimizer.h).
#include "drop_optimizer.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "io/copy_tree.h"
#include "save_state.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::accelerate {
namespace fs = std::filesystem;

DropResult drop_optimizer(const std::string& path, const std::string& output, Progress* progress) {
  const SaveState in = read_save_state(path);
  DropResult r;
  std::set<std::string> optimizers;
  for (const auto& p : in.parts) {
    if (p.role != "optimizer") {
      r.kept.push_back(p.folder + "/");
      continue;
    }
    optimizers.insert(p.folder);
    r.dropped.push_back(p.folder + "/");
    const auto ckpt = dcp::Checkpoint::open((fs::path(in.dir) / p.folder).string());
    r.keys += ckpt->metadata().entries.size();
    for (const auto& f : fs::recursive_directory_iterator(fs::path(in.dir) / p.folder))
      if (f.is_regular_file()) r.bytes += f.file_size();
  }
  if (optimizers.empty())
    throw Error(ErrorKind::Unsupported, in.dir, request_text("{drop_optimizer}"),
                "holds no optimizer_<i>/ folder: nothing to drop");
  r.kept.insert(r.kept.end(), in.other_files.begin(), in.other_files.end());
  r.output = dcp::checked_new_output(output, {path, in.dir});
  dcp::write_new_folder(r.output, [&](const std::string& tmp) {
    // The input's folder but its optimizer folders (links followed: only files).
    io::copy_tree(in.dir, tmp, progress, [&](const fs::directory_entry& e) {
      return !(optimizers.count(e.path().filename().string()) && e.is_directory());
    });
    // The copy is checked before it is published: the input's models and files, no optimizer.
    const SaveState copy = read_save_state(tmp);
    std::vector<std::string> models_in, models_out;
    for (const auto& p : in.parts)
      if (p.role == "model") models_in.push_back(p.folder);
    for (const auto& p : copy.parts) {
      if (p.role != "model")
        throw Error(ErrorKind::Inconsistent, tmp, p.folder, "is an optimizer folder left in the copy");
      models_out.push_back(p.folder);
    }
    if (models_in != models_out || copy.other_files != in.other_files)
      throw Error(ErrorKind::Inconsistent, tmp, "drop-optimizer",
                  "does not hold the input's models and files: nothing was published");
  });
  return r;
}

}  // namespace ckptdoc::accelerate
