#pragma once
// `repair --drop-optimizer` of an Accelerate FSDP save_state folder: a new folder without its optimizer_<i>/
// folders; pytorch_model_fsdp_<i>/, scheduler.bin, random_states_<r>.pkl and every other file copied byte for
// byte. Accelerate's load_state reads optimizer_<i>/ for every optimizer that was prepared, and under FSDP2 a
// model is prepared together with its optimizer, so the output is loaded as a weights-only resume does it:
// accelerate.utils.load_fsdp_model (what load_state calls for each model) into the prepared model, with the
// fresh optimizer prepared beside it. The input is never written.
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::accelerate {

struct DropResult {
  std::string output;
  std::vector<std::string> dropped;  // the optimizer_<i>/ folders left out
  size_t keys = 0;                   // their DCP keys
  uint64_t bytes = 0;                // their files' bytes
  std::vector<std::string> kept;     // the parts and files copied, relative to the folder
};

// Throws ckptdoc::Error: InvalidRequest (output exists, or inside the input), Unsupported (no
// optimizer_<i>/), NotFound (not a save_state folder), Inconsistent when the copy does not read back as the
// input's folder without its optimizers (nothing is published then).
// `progress` counts the copy's bytes (the kept folders and files) and is checked for a cancel between steps.
DropResult drop_optimizer(const std::string& path, const std::string& output, Progress* progress = nullptr);

}  // namespace ckptdoc::accelerate
