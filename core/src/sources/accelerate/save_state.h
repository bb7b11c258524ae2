#pragma once
// Hugging Face Accelerate's `accelerator.save_state(DIR)` under FSDP with SHARDED_STATE_DICT
// (Accelerate 1.16, utils/fsdp_utils.py): per model i a DCP folder `pytorch_model_fsdp_<i>/` of {"model":
// state_dict} (keys `model.<fqn>`), per optimizer i a DCP folder `optimizer_<i>/` of {"optimizer": ...} (keys
// `optimizer.state.<fqn>.{step,exp_avg,exp_avg_sq}`, `optimizer.param_groups.<g>.*`), beside them
// `scheduler.bin` and `random_states_<rank>.pkl` (torch.save pickles, not read here).
#include <string>
#include <vector>

namespace ckptdoc::accelerate {

struct Part {
  std::string folder;  // "pytorch_model_fsdp_0", relative to the save_state folder
  std::string role;    // "model" | "optimizer"
  int index = 0;
};

struct SaveState {
  std::string dir;
  std::vector<Part> parts;               // models first, then optimizers, each by index
  std::vector<std::string> other_files;  // everything else, relative, sorted: listed as not read
};

// Whether `path` is a save_state folder: a directory holding a `pytorch_model_fsdp_<i>/` that is a DCP
// folder. Cheap (names only), never throws.
bool is_save_state_folder(const std::string& path);

// The parts and other files of `dir` (bounded listing). Throws ckptdoc::Error NotFound naming `dir` when it
// holds no `pytorch_model_fsdp_<i>/`.
SaveState read_save_state(const std::string& dir);

}  // namespace ckptdoc::accelerate
