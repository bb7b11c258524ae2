#include "repaired_copy.h"

#include <filesystem>

#include "io/copy_tree.h"
#include "sources/dcp/rewrite_records.h"

namespace fs = std::filesystem;

namespace ckptdoc::megatron {

bool has_integrity(const IterationFolder& folder) {
  std::error_code ec;
  return fs::symlink_status(fs::path(folder.dir) / kIntegrity, ec).type() != fs::file_type::not_found;
}

std::string repaired_iteration_dir(const IterationFolder& folder, const std::string& out) {
  return folder.tracker.empty() ? out : out + "/" + fs::path(folder.dir).filename().string();
}

void write_repaired_copy(const IterationFolder& folder, const std::string& out, CopyInput copy,
                         Progress* progress,
                         const std::function<void(const std::string& iteration_dir)>& fill) {
  dcp::write_new_folder(
      out,
      [&](const std::string& tmp) {
        const std::string iteration_dir = repaired_iteration_dir(folder, tmp);
        // All of it, folders too (megatron-core 0.19 keeps its common state in common_state/), but the sha256
        // list of the files the repair rewrites; links are followed.
        if (copy == CopyInput::Whole)
          io::copy_tree(folder.dir, iteration_dir, progress,
                        [](const fs::directory_entry& e) { return e.path().filename() != kIntegrity; });
        else
          fs::create_directories(iteration_dir);
        if (!folder.tracker.empty()) fs::copy_file(folder.tracker, tmp + "/" + std::string(kTracker));
        fill(iteration_dir);
      },
      progress);
}

}  // namespace ckptdoc::megatron
