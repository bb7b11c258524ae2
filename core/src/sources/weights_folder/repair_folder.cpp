// The new folders of a weights folder's optimizer repairs (see repair_folder.h).
#include "repair_folder.h"

#include <algorithm>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "io/copy_tree.h"
#include "sources/accelerate/drop_refusal.h"
#include "sources/dcp/rewrite_records.h"

namespace fs = std::filesystem;

namespace ckptdoc::weights_folder {

namespace {

bool is_optimizer_file(const OptimizerFolder& folder, const std::string& name) {
  return std::find(folder.optimizer_files.begin(), folder.optimizer_files.end(), name) !=
         folder.optimizer_files.end();
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

ResetResult reset_optimizer(const OptimizerFolder& folder, const std::string& output, Progress* progress) {
  ResetResult r;
  r.output = dcp::checked_new_output(output, {folder.dir});
  for (const auto& name : entries(folder.dir))
    if (!is_optimizer_file(folder, name)) r.kept.push_back(name);
  dcp::write_new_folder(
      r.output,
      [&](const std::string& tmp) {
        io::copy_tree(folder.dir, tmp, progress);
        for (const auto& file : folder.optimizer_files)
          r.files.push_back(reset_adam_file(folder.dir, file, tmp));
      },
      progress);
  return r;
}

std::optional<std::string> drop_refusal(const OptimizerFolder& folder) {
  if (folder.framework != Framework::Accelerate) return std::nullopt;
  return accelerate::drop_refusal(folder.optimizer_files.front(), "load_accelerator_state");
}

DropResult drop_optimizer(const OptimizerFolder& folder, const std::string& output, Progress* progress) {
  if (const auto why = drop_refusal(folder))
    throw Error(ErrorKind::Unsupported, folder.dir, request_text("{drop_optimizer}"), request_text(*why));
  DropResult r;
  for (const auto& name : entries(folder.dir)) {
    if (is_optimizer_file(folder, name)) {
      r.dropped.push_back(name);
      r.bytes += fs::file_size(fs::path(folder.dir) / name);
    } else {
      r.kept.push_back(name);
    }
  }
  r.output = dcp::checked_new_output(output, {folder.dir});
  dcp::write_new_folder(
      r.output,
      [&](const std::string& tmp) {
        io::copy_tree(folder.dir, tmp, progress, [&](const fs::directory_entry& e) {
          return !is_optimizer_file(folder, e.path().filename().string());
        });
        // Checked before it is published: the input's entries but the optimizer file.
        if (entries(tmp) != r.kept)
          throw Error(ErrorKind::Inconsistent, tmp, "drop-optimizer",
                      "does not hold the input's files less the optimizer: nothing was published");
      },
      progress);
  return r;
}

}  // namespace ckptdoc::weights_folder
