#include "ckptdoc/sources/diff_side.h"

#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/deepspeed/diff_side.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/registry.h"

namespace ckptdoc::sources {

OpenedDiffSide open_diff_side(const std::string& path, analysis::DiffWhat what) {
  const auto source = find_source(path);
  if (source->reads_into_catalog()) {
    std::shared_ptr<const deepspeed::Checkpoint> ckpt = deepspeed::Checkpoint::open(path);
    return {deepspeed::diff_side(*ckpt, what), ckpt};
  }
  if (!source->can(Command::Diff)) throw source->refusal(path, Command::Diff);
  auto w = what == analysis::DiffWhat::ExpAvg || what == analysis::DiffWhat::ExpAvgSq
               ? source->moment_tensors(path, std::string(analysis::diff_what_name(what)))
               : source->weight_tensors(path);
  return {{std::move(w.what), std::move(w.tensors)}, std::move(w.keep_alive)};
}

}  // namespace ckptdoc::sources
