// A ZeRO-3 save that kept only rank 0's model file because of DeepSpeed #7546 (catalog_builder.h).
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

// Before 0.18.0, DeepSpeed's engine names every rank's ZeRO-3 model file after rank 0 when the config sets
// checkpoint.load_universal (set to resume from a universal checkpoint, and usually left on): the ranks write
// one path over each other and zero_pp_rank_0_*_model_states.pt is all that is left. The optimizer files are
// named correctly, so the masters and moments are whole. Said only when the files show all of it: rank 0's
// model file alone, every optimizer file, load_universal in the saved config, a version before 0.18.0.
void CatalogBuilder::note_model_files_not_saved() {
  using detail::dict_get;
  if (cat_.wrapper != OptimizerWrapper::Zero3 || !model_ || layout_dp_ < 2 || !cat_.model_file(-1, 0)) return;
  std::vector<int> lost;
  for (int r = 0; r < layout_dp_; ++r) {
    if (!cat_.optim_file(r)) return;
    if (r > 0 && cat_.model_file(-1, r)) return;
    if (r > 0) lost.push_back(r);
  }
  std::string ranks;
  for (int r : lost) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const Value* checkpoint = dict_get(dict_get(&model_->root, "ds_config"), "checkpoint");
  const auto load_universal =
      checkpoint ? detail::opt_bool(dict_get(checkpoint, "load_universal")) : std::nullopt;
  const auto v = parse_ds_version(cat_.ds_version);
  if (!load_universal.value_or(false) || (v && *v >= DsVersion{0, 18, 0})) return;
  std::string msg =
      "only rank 0's ZeRO-3 model file was saved: DeepSpeed " + cat_.ds_version +
      " ran with checkpoint.load_universal in its config (saved in this file), and before 0.18.0 that makes "
      "every "
      "rank save its model file under rank 0's name (DeepSpeed #7546): rank(s) " +
      ranks +
      " wrote theirs over it. Every optimizer file is here: the fp32 masters and Adam moments are whole. "
      "DeepSpeed's load_checkpoint fails on the ranks without a file, and so do zero_to_fp32.py and "
      "ds_to_universal.py. ";
  if (cat_.frozen_params.empty())
    msg +=
        "A ZeRO-3 job's ranks save the same model file (it holds no partition of a trainable param), so the "
        "missing ones can be restored as copies of rank 0's: ckptdoc repair --restore-model-files. Then turn "
        "load_universal off (or use DeepSpeed 0.18.0+) before the next save.";
  else
    msg += "This job has " + std::to_string(cat_.frozen_params.size()) +
           " frozen params, whose ZeRO-3 fragments each rank kept in its own model file: the other ranks' "
           "fragments are lost, and the files cannot be restored from rank 0's.";
  problem(model::Code::Zero3ModelFilesNotSaved, std::move(msg), model_->path, lost);
}

}  // namespace ckptdoc::deepspeed
