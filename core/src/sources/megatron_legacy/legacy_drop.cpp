// A legacy Megatron save without its optimizer, in a copy (legacy_drop.h).
#include "legacy_drop.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/request_field.h"
#include "legacy_copy.h"
#include "legacy_folder.h"
#include "sources/megatron/drop_optimizer.h"

namespace ckptdoc::megatron_legacy {
namespace fs = std::filesystem;
namespace {

using megatron::kOptimizerEntries;  // what generate_state_dict writes only when the optimizer is saved
constexpr const char* kDistribOptim = "distrib_optim.pt";

struct RankPlan {
  std::string file;  // "mp_rank_00/model_optim_rng.pt"
  std::string archive_name;
  Value kept;
};

uint64_t size_of(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

}  // namespace

LegacyDrop drop_optimizer(const std::string& path, const std::string& output, Progress* progress) {
  const LegacyFolder folder = resolve(path);
  LegacyDrop r;
  r.output = checked_output(folder, path, output);
  std::vector<RankPlan> plans;
  for (const auto& rf : folder.ranks) {
    const TorchFile tf = TorchFile::open(rf.model_file);  // its errors name the file
    if (!tf.root.is_dict())
      throw Error(ErrorKind::Unsupported, rf.model_file, request_text("{drop_optimizer}"),
                  "its root is a " + tf.root.type_name() + ", not a dict: nothing was dropped");
    RankPlan p{rf.name + "/" + kModelFile, tf.archive_name, tf.root.clone()};
    for (const char* name : kOptimizerEntries)
      if (p.kept.erase(name) && std::find(r.dropped.begin(), r.dropped.end(), name) == r.dropped.end())
        r.dropped.emplace_back(name);
    r.bytes_before += size_of(rf.model_file);
    if (rf.distrib_optim) {
      ++r.distrib_optim_dropped;
      r.bytes_before += size_of(fs::path(rf.model_file).parent_path() / kDistribOptim);
    }
    plans.push_back(std::move(p));
  }
  if (r.dropped.empty() && r.distrib_optim_dropped == 0)
    throw Error(ErrorKind::Unsupported, folder.dir, request_text("{drop_optimizer}"),
                "no rank file holds an optimizer (saved with --no-save-optim?): nothing to drop");
  r.rank_files = plans.size();
  // The rank folders are written here; anything else in the iteration folder is copied as it is.
  const auto is_rank = [&](const fs::directory_entry& e) {
    for (const auto& rf : folder.ranks)
      if (e.path().filename() == rf.name) return true;
    return false;
  };
  write_legacy_copy(
      folder, r.output, progress, [&](const fs::directory_entry& e) { return !is_rank(e); },
      [&](const std::string& iter) {
        for (size_t i = 0; i < plans.size(); ++i) {
          const auto& rf = folder.ranks[i];
          const auto from = fs::path(rf.model_file).parent_path();
          io::copy_tree(from.string(), iter + "/" + rf.name, progress, [](const fs::directory_entry& e) {
            return e.path().filename() != kModelFile && e.path().filename() != kDistribOptim;
          });
          TorchWriteOptions options;
          options.archive_name = plans[i].archive_name;
          const std::string to = iter + "/" + plans[i].file;
          write_torch_file(to, plans[i].kept, options);
          // Checked before it is published: the input's tree without the dropped entries.
          if (!plans[i].kept.equals(TorchFile::open(to).root))
            throw Error(ErrorKind::Inconsistent, to, request_text("{drop_optimizer}"),
                        "does not read back as the input's without its optimizer entries: nothing was "
                        "published");
          r.bytes_after += size_of(to);
        }
      });
  return r;
}

}  // namespace ckptdoc::megatron_legacy
