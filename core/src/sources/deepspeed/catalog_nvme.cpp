// Catalog building: DeepSpeed's NVMe offload (0.18.0+). With ZeRO-3 `offload_optimizer: {device: nvme}`,
// save_checkpoint copies each rank's swap folder to <tag>/offloaded_tensors/rankNN/ (`<param id>.tensor.swp`
// raw tensors) and load_checkpoint copies it back to nvme_path. ckptdoc does not read those files, so their
// presence is a finding: the optimizer state swapped out at save time is there, not in the optimizer files.
#include <filesystem>
#include <map>

#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/catalog_builder.h"

namespace ckptdoc::deepspeed {

namespace fs = std::filesystem;

void CatalogBuilder::note_nvme_offload() {
  if (ck_.snapshot_) return;
  const fs::path dir = fs::path(cat_.tag_dir) / "offloaded_tensors";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::map<std::string, std::pair<int64_t, uint64_t>> ranks;  // rank folder -> files, bytes
  int64_t files = 0;
  uint64_t bytes = 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const fs::path rel = fs::relative(it->path(), dir, ec);
    const std::string top = rel.begin() != rel.end() ? rel.begin()->string() : std::string();
    const uint64_t size = it->file_size(ec);
    auto& r = ranks[rel.has_parent_path() ? top : std::string(".")];
    ++r.first, r.second += size;
    ++files, bytes += size;
  }
  std::string listed;
  for (const auto& [name, fb] : ranks)
    listed += (listed.empty() ? "" : ", ") + name + " (" + std::to_string(fb.first) + " file" +
              (fb.first == 1 ? "" : "s") + ")";
  problem(
      model::Code::NvmeOffloadNotRead,
      "offloaded_tensors/ holds DeepSpeed's copy of NVMe-offloaded tensors (ZeRO-3 offload_optimizer device "
      "nvme, DeepSpeed 0.18.0+): " +
          std::to_string(files) + " file" + (files == 1 ? "" : "s") + ", " + std::to_string(bytes) +
          " bytes" + (listed.empty() ? std::string() : " in " + listed) +
          ". ckptdoc does not read them: optimizer state that was swapped to NVMe when the checkpoint was "
          "saved (fp32 masters, Adam moments) is in those files, not in the optimizer files checked here, "
          "and was not checked. DeepSpeed's load_checkpoint copies them back to its nvme_path",
      "offloaded_tensors");
  cat_.problems.back().not_checked =
      "the NVMe-offloaded tensors DeepSpeed copied to offloaded_tensors/ were not read (their masters and "
      "moments were not checked)";
}

}  // namespace ckptdoc::deepspeed
