#pragma once
// `repair --drop-optimizer` of a legacy Megatron save: a copy that holds what Megatron-LM's save_checkpoint
// writes under --no-save-optim (megatron/training/checkpointing.py 0.18.0): each model_optim_rng.pt without
// its top-level "optimizer" and "opt_param_scheduler" entries (generate_state_dict, :1032-1058), written anew
// from the input's tree (every other entry, args, model and rng_state, the input's), and no distrib_optim.pt
// (save_checkpoint writes it only when the optimizer is saved, :577-587). Megatron-LM loads it with
// --no-load-optim or --finetune (load_checkpoint then reads neither entry and calls
// optimizer.reload_model_params(), :1919-1964: the fp32 mains start as the loaded weights, Adam fresh).
// The input is never written.
#include <string>
#include <vector>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::megatron_legacy {

struct LegacyDrop {
  std::string output;                          // the new folder
  size_t rank_files = 0;                       // model_optim_rng.pt files rewritten
  std::vector<std::string> dropped;            // the top-level entries left out (of every rank file)
  size_t distrib_optim_dropped = 0;            // distrib_optim.pt files left out
  uint64_t bytes_before = 0, bytes_after = 0;  // the rank folders' optimizer and model files, in and out
};

// Throws ckptdoc::Error before anything is published: Unsupported when no rank file holds an optimizer
// (nothing to drop) or a rank file's root is not a dict; the read errors of the files; InvalidRequest for an
// output inside the input or existing. The copy is read again before it is published: each rank file must be
// the input's tree without the dropped entries.
LegacyDrop drop_optimizer(const std::string& path, const std::string& output, Progress* progress);

}  // namespace ckptdoc::megatron_legacy
