#pragma once
// Megatron-LM's legacy checkpoint folder (ckpt_format "torch", docs/megatron-legacy-format.md): a save folder
// with latest_checkpointed_iteration.txt naming iter_NNNNNNN/ (or "release"), each model-parallel rank's
// mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt inside, and distrib_optim.pt beside it with the distributed
// optimizer. No metadata.json: that is the torch_dist layout (sources/megatron/).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckptdoc::megatron_legacy {

inline constexpr const char* kModelFile = "model_optim_rng.pt";  // each rank folder's model and optimizer

// One mp_rank_* folder of the iteration folder.
struct RankFolder {
  std::string name;                 // "mp_rank_01_000"
  std::vector<int> numbers;         // the name's numbers: {1, 0}
  std::string model_file;           // <iteration>/<name>/model_optim_rng.pt (absolute as given)
  std::string shown;                // "<name>/model_optim_rng.pt", as findings name it
  bool distrib_optim = false;       // distrib_optim.pt beside it
  std::vector<std::string> others;  // any other file in the folder (listed, not read)
  int tp = 0, pp = 0, ep = 0;       // set by place_ranks() from the saved args
};

struct LegacyFolder {
  std::string save_dir;              // the folder the user named when it holds the tracker
  std::string tracker;               // latest_checkpointed_iteration.txt, when read
  std::string dir;                   // the iteration folder
  std::optional<int64_t> iteration;  // unset: "release"
  std::vector<RankFolder> ranks;     // by name
};

// Whether `path` is a legacy Megatron save folder (its tracker names a folder holding mp_rank_* and no
// metadata.json) or such an iteration folder. Cheap (names and the tracker's few bytes), never throws.
bool is_legacy_path(const std::string& path);

// The iteration folder and its rank folders. Throws ckptdoc::Error naming the tracker or folder: a tracker
// that names no iteration, a missing folder, no mp_rank_* folder, an mp_rank_* name that is not numbers.
LegacyFolder resolve(const std::string& path);

// The tp / pp / ep rank of each folder from its name and the saved sizes (Megatron-LM's get_checkpoint_name:
// mp_rank_TT with neither, mp_rank_TT_PPP with pipeline stages, mp_rank_TT_EEE with expert ranks alone,
// mp_rank_TT_PPP_EEE with both). Throws Unsupported naming the folder when its name does not fit the sizes.
void place_ranks(LegacyFolder& folder, int pp_size, int ep_size);

}  // namespace ckptdoc::megatron_legacy
