#pragma once
// A Hugging Face Trainer / Accelerate checkpoint-N/ folder: DeepSpeed's `latest` and global_stepN/ beside the
// Trainer's own files (trainer_state.json, training_args.bin, rng_state_<rank>.pth, the model's config.json
// and 16-bit weights, the tokenizer). A repair carries those files into its output, so that
// Trainer.train(resume_from_checkpoint=...) resumes from the repaired folder as from the original.
#include <string>
#include <vector>

namespace ckptdoc::deepspeed {

// The top-level files of `save_dir` that are the Trainer's, not DeepSpeed's (not `latest`, not the
// zero_to_*.py scripts), sorted; empty unless `save_dir` holds trainer_state.json. Folders are not listed.
std::vector<std::string> trainer_folder_files(const std::string& save_dir);

}  // namespace ckptdoc::deepspeed
