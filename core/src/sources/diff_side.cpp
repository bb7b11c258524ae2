#include "ckptdoc/sources/diff_side.h"

#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diff_side.h"
#include "ckptdoc/sources/registry.h"

namespace ckptdoc::sources {

OpenedDiffSide open_diff_side(const std::string& path, analysis::DiffWhat what) {
  const auto source = find_source(path);
  if (source->reads_into_catalog()) {
    std::shared_ptr<const deepspeed::Checkpoint> ckpt = deepspeed::Checkpoint::open(path);
    return {deepspeed::diff_side(*ckpt, what), ckpt};
  }
  if (!source->can(Command::Diff)) throw source->refusal(path, Command::Diff);
  // Named absolute, as the catalog names a DeepSpeed side (its tag folder), so both sides read alike.
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec).lexically_normal();
  const std::string named = ec ? path : absolute.string();
  auto w = what == analysis::DiffWhat::ExpAvg || what == analysis::DiffWhat::ExpAvgSq
               ? source->moment_tensors(named, std::string(analysis::diff_what_name(what)))
               : source->weight_tensors(named);
  return {{std::move(w.what), std::move(w.tensors)}, std::move(w.keep_alive)};
}

}  // namespace ckptdoc::sources
