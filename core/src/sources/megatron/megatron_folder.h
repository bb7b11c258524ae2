#pragma once
// Megatron-core distributed checkpoints (megatron.core.dist_checkpointing, torch_dist backend): which folder
// is the iteration, and what its Megatron files say. The tensors are a PyTorch Distributed Checkpoint, read
// by sources/dcp/. Facts about the files: docs/reference.md "Megatron-core folders".
//
//   <save>/latest_checkpointed_iteration.txt   "2" (Megatron-LM's tracker; "release" for a release folder)
//   <save>/iter_0000002/metadata.json          {"sharded_backend": "torch_dist", ...}
//   <save>/iter_0000002/common.pt              torch.save of the state that is not sharded (args, iteration);
//                                              from megatron-core 0.19 the bytes item common_state/shard_0_1
//   <save>/iter_0000002/.metadata, __<r>_<n>.distcp
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/sources/dcp/checkpoint.h"

namespace ckptdoc::megatron {

inline constexpr const char* kTracker = "latest_checkpointed_iteration.txt";

// A folder ckptdoc reads as Megatron-core: it holds the tracker file, or a metadata.json with a
// "sharded_backend". Cheap (names and one small JSON file), never throws.
bool is_megatron_path(const std::string& path);

struct IterationFolder {
  std::string dir;                   // the iteration folder, the DCP folder
  std::string tracker;               // the tracker file read to find it, or empty (the path was the folder)
  std::optional<int64_t> iteration;  // from the tracker or the folder's name iter_NNNNNNN; none for "release"
  std::string backend;               // metadata.json's sharded_backend ("torch_dist")
  std::string metadata_json;         // metadata.json as written, one line
};

// The iteration folder `path` names: itself, or the one its tracker names (a number, or "release"), which
// must be a folder directly inside `path` (never a path elsewhere). Throws ckptdoc::Error naming the tracker
// or metadata.json: Corrupt (not a number), NotFound (no such folder), Unsupported (a sharded backend other
// than torch_dist, or an iteration folder without metadata.json: a legacy mp_rank_XX checkpoint).
IterationFolder resolve(const std::string& path);

// The common state (what is not sharded): common.pt, or megatron-core 0.19's bytes item
// common_state/shard_0_1 in the DCP. What it holds, read with the inert unpickler (nothing in it runs).
struct CommonState {
  bool present = false;
  std::string where = "common.pt";   // or "common_state/shard_0_1 (<file> [offset O, N bytes])"
  bool in_checkpoint = false;        // the DCP item (its pickle is judged with the other bytes items)
  std::string file = "common.pt";    // the file findings name (the item's .distcp file)
  std::string key;                   // the item's key, or empty
  std::string error;                 // why it could not be read (present but unreadable)
  std::vector<std::string> keys;     // top-level keys, in order
  std::optional<int64_t> iteration;  // its "iteration"
  std::optional<double> checkpoint_version;
  std::string args_type;              // "argparse.Namespace" (Megatron-LM's args), or empty
  size_t args_fields = 0;             // the Namespace's attributes, read as data
  std::vector<PickleHazard> hazards;  // what torch.load of it would run (pickle_safety.h's rule)
  std::string summary() const;        // one line for the text reports
};

// common.pt when the folder holds one (megatron-core's load reads it first: 0.19's serialization.py
// load_common_state_dict), else the DCP's bytes item common_state/shard_0_1, a torch.save of [state] (0.19's
// save puts the state there as ShardedObject "common_state"). Absent when neither exists.
CommonState read_common(const std::string& iteration_dir, const dcp::Checkpoint& ckpt);

}  // namespace ckptdoc::megatron
