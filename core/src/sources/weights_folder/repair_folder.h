#pragma once
// The two repairs of a weights folder's optimizer files (optimizer_folder.h), each a new folder: the input's
// files copied (links followed, dcp::write_new_folder: published whole or not at all, never over what is
// there), the optimizer files changed or left out. The input is never written.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/task/progress.h"
#include "optimizer_folder.h"
#include "reset_optimizer_file.h"

namespace ckptdoc::weights_folder {

struct ResetResult {
  std::string output;
  std::vector<FileReset> files;   // one per optimizer file
  std::vector<std::string> kept;  // the other entries, copied byte for byte
};

// --reset-optimizer: each optimizer file's Adam moments and steps zeroed (reset_optimizer_file.h). Throws
// ckptdoc::Error InvalidRequest (the output exists or is inside the input) and reset_adam_file's errors;
// `progress` counts the copy's bytes and is checked for a cancel (Cancelled): nothing is then published.
ResetResult reset_optimizer(const OptimizerFolder& folder, const std::string& output, Progress* progress);

struct DropResult {
  std::string output;
  std::vector<std::string> dropped;  // "optimizer.pt"
  uint64_t bytes = 0;                // their size
  std::vector<std::string> kept;
};

// --drop-optimizer of a Trainer folder: the copy without optimizer.pt. transformers 5.25
// Trainer._load_optimizer_and_scheduler loads the optimizer and scheduler only when optimizer.pt (or
// optimizer.bin) is there and scheduler.pt too, and otherwise goes on with the fresh ones it made, so the
// Trainer resumes from the copy with a new optimizer and a new LR schedule (scheduler.pt is copied but not
// read). Accelerate's folders are refused (ErrorKind::Unsupported; accelerate/drop_refusal.h):
// accelerate 1.16 load_accelerator_state torch.loads optimizer.bin (optimizer_<i>.bin) for every prepared
// optimizer, so load_state fails on a folder without it; --reset-optimizer writes the file load_state reads
// with a fresh optimizer's state. drop_refusal says why (request_text marks), or nullopt for a folder whose
// drop is allowed.
std::optional<std::string> drop_refusal(const OptimizerFolder& folder);
DropResult drop_optimizer(const OptimizerFolder& folder, const std::string& output, Progress* progress);

}  // namespace ckptdoc::weights_folder
