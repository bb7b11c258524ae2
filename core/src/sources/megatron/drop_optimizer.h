#pragma once
// `repair --drop-optimizer` of a Megatron-core torch_dist save: a new iteration folder (and the tracker, when
// the save folder was named) that holds what Megatron-LM writes under --no-save-optim. The DCP files lose
// their optimizer.* keys (sources/dcp/drop_optimizer.h: a new .metadata, the kept items' bytes the input's),
// and common.pt loses its top-level "optimizer" and "opt_param_scheduler" entries, the two that
// Megatron-LM's generate_state_dict leaves out under --no-save-optim (megatron/training/checkpointing.py);
// every other entry of common.pt (args, iteration, checkpoint_version, rng state) is the input's.
// megatron-core 0.19 keeps that state in the DCP (bytes item common_state/shard_0_1): the same entries leave
// that item, rewritten as torch.save([state]) in the new storage file.
// metadata.json is copied. integrity.json (megatron-core 0.18+: sha256 of each file) would list files this
// rewrites, so it is left out of the copy and the result says so. The input is never written.
#include <string>
#include <vector>

#include "sources/dcp/drop_optimizer.h"

namespace ckptdoc::megatron {

// What Megatron-LM's generate_state_dict writes only when the optimizer is saved (not --no-save-optim): the
// common state's entries here, each legacy rank file's in megatron_legacy's drop.
inline constexpr const char* kOptimizerEntries[] = {"optimizer", "opt_param_scheduler"};

struct DropResult {
  std::string output;  // the folder written
  std::string
      iteration_dir;    // the iteration folder inside it (== output when the iteration folder was named)
  dcp::DropCounts dcp;  // the DCP files' keys and bytes
  std::vector<std::string> common_dropped;  // the common state's top-level entries left out
  std::string common_where = "common.pt";   // or "common_state/shard_0_1" (megatron-core 0.19)
  bool integrity_dropped = false;           // the input had integrity.json; the copy has none
};

// Throws ckptdoc::Error: InvalidRequest (output exists, or inside the input), Unsupported (no optimizer.*
// keys, per-rank metadata), and the read errors of the checkpoint. Verifies the copy before publishing it:
// its keys are the input's but the optimizer's, each kept item byte for byte, and common.pt reads as the
// input's without the dropped entries.
// `progress`: dcp::drop_optimizer's (storage files written, cancel between them).
DropResult drop_optimizer(const std::string& path, const std::string& output, Progress* progress = nullptr);

}  // namespace ckptdoc::megatron
