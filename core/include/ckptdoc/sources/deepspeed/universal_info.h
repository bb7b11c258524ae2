#pragma once
// What a DeepSpeed universal checkpoint folder holds (deepspeed-format.md §7): one folder per trainable param
// under zero/ with its fp32 master and optimizer states as whole tensors, zero/optimizer_state.pt, and the
// model-states file(s) copied from the checkpoint it was made from. Which DeepSpeed versions' universal
// loaders accept a folder depends on what it carries (see `loads_with_iteration` / `loads_with_step_files`).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckptdoc::deepspeed {

// A state file as the catalog saw it: a later open that finds another inode or size was changed meanwhile.
struct UniversalStateFileId {
  uint64_t bytes = 0, device = 0, inode = 0;
};

struct UniversalParamFiles {
  std::string name;  // the trainable param, also its folder name under zero/
  int optimizer_group =
      -1;  // its optimizer param group (param_shapes index; ZeRO-3: the group of its sub-group)
  std::vector<std::string>
      states;  // the *.pt files in its folder, without ".pt", sorted ("exp_avg", "fp32", "step")
  std::vector<UniversalStateFileId> ids;  // per state; all zeros where the file could not be read
  std::optional<int64_t> step;            // step.pt's value
  std::optional<int64_t> cat_dim;         // fp32.pt's 'cat_dim' (absent for raw ZeRO-3 tensors)
};

struct UniversalInfo {
  std::string zero_dir;              // absolute path of the tag folder's zero/
  int source_dp_world_size = 0;      // dp_world_size of the checkpoint it was converted from (model file)
  std::optional<int64_t> iteration;  // the model file's client key `iteration` (Megatron's)
  bool has_universal_checkpoint_info = false;  // the model file carries universal_checkpoint_info
  bool has_param_groups = false;  // zero/optimizer_state.pt holds 'param_groups' (ds_to_universal 0.14.1+)
  bool has_step_files = false;    // every param folder holds step.pt (ds_to_universal 0.14.1+)
  std::vector<UniversalParamFiles> params;      // in flat-group order: catalog group k is params[k]
  std::vector<std::string> unexpected_folders;  // zero/<x>/ naming no trainable param (loaders ignore them)
  // zero/<x>/ of a module buffer or frozen param: 0.19's ds_to_universal.py writes their values (fp32.pt)
  std::vector<std::string> module_entry_folders;
  std::optional<double> version;  // universal_checkpoint_info['universal_checkpoint_version']
  // ZeRO-3's universal loader takes the Adam step of every sub-group from zero/optimizer_state.pt's
  // optimizer_state_dict['state'][0]['step'] (its converter writes no step.pt)
  bool zero3 = false;
  std::optional<int64_t> zero3_step;

  // DeepSpeed 0.12.3-0.14.0 set the Adam step to client_state['iteration'] + 1 (and fail without it).
  bool loads_with_iteration() const { return iteration.has_value(); }
  // DeepSpeed 0.14.1+ read each param's step.pt and optimizer_state.pt['param_groups'].
  bool loads_with_step_files() const { return has_param_groups && has_step_files; }
};

}  // namespace ckptdoc::deepspeed
