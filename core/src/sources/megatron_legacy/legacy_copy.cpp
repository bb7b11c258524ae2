// The new folder of a legacy Megatron repair (legacy_copy.h).
#include "legacy_copy.h"

#include <filesystem>
#include <vector>

#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::megatron_legacy {
namespace fs = std::filesystem;

std::string checked_output(const LegacyFolder& folder, const std::string& path, const std::string& output) {
  std::vector<std::string> inputs{path, folder.dir};
  if (!folder.save_dir.empty()) inputs.push_back(folder.save_dir);
  return dcp::checked_new_output(output, inputs);
}

void write_legacy_copy(const LegacyFolder& folder, const std::string& out, Progress* progress,
                       const io::KeepEntry& keep,
                       const std::function<void(const std::string& iteration_dir)>& fill) {
  dcp::write_new_folder(
      out,
      [&](const std::string& partial) {
        std::string iter = partial;
        if (!folder.save_dir.empty()) {
          fs::copy_file(folder.tracker, fs::path(partial) / fs::path(folder.tracker).filename());
          iter = (fs::path(partial) / fs::path(folder.dir).filename()).string();
        }
        io::copy_tree(folder.dir, iter, progress, keep);
        fill(iter);
      },
      progress);
}

}  // namespace ckptdoc::megatron_legacy
