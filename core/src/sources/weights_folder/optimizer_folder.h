#pragma once
// A weights folder that keeps its optimizer beside the weights as torch.save(optimizer.state_dict()) files
// (weights/optimizer_file.h), with no DeepSpeed files: a Hugging Face Trainer checkpoint-N/ written without
// DeepSpeed or FSDP (optimizer.pt, transformers 5.25 Trainer._save_optimizer_and_scheduler), or an Accelerate
// save_state folder of a plain or FSDP FULL_STATE_DICT run (optimizer.bin, optimizer_<i>.bin: accelerate 1.16
// checkpointing.save_accelerator_state / fsdp_utils.save_fsdp_optimizer). The catalog reads these folders;
// their repairs are this source's.
#include <cstdint>
#include <string>
#include <vector>

namespace ckptdoc::weights_folder {

// Who reads the optimizer file back, which decides what a dropped optimizer may look like.
enum class Framework : uint8_t {
  Trainer,     // optimizer.pt: Trainer._load_optimizer_and_scheduler
  Accelerate,  // optimizer.bin, optimizer_<i>.bin: Accelerator.load_state
};

struct OptimizerFolder {
  std::string dir;  // absolute, normalised
  Framework framework = Framework::Trainer;
  std::vector<std::string> optimizer_files;  // names in `dir`, sorted (weights::optimizer_files_in)
};

// Whether `path` is such a folder: cheap (file names only), never throws. A folder with DeepSpeed's files
// (`latest`, global_step*/) is the catalog's alone.
bool is_optimizer_folder(const std::string& path);

// The folder at `path`. Throws ckptdoc::Error NotFound / Unsupported naming it when it is not one.
OptimizerFolder read_optimizer_folder(const std::string& path);

}  // namespace ckptdoc::weights_folder
