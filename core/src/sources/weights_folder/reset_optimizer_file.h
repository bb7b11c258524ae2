#pragma once
// `repair --reset-optimizer` of one torch.save(optimizer.state_dict()) file of torch Adam / AdamW (the
// Trainer's optimizer.pt, Accelerate's optimizer.bin): in a byte copy of the file, every storage record of a
// state's exp_avg, exp_avg_sq, max_exp_avg_sq and step is zeroed in place (same sizes, new CRC-32 fields:
// sources/dcp/rewrite_records.h), so the pickle, the param groups (lr, betas, ...) and every other byte are
// the input's. torch.load(weights_only=True) reads the copy as it read the input. Loaded, torch's Adam holds
// step 0 and zero moments, which is a fresh Adam's state: its first step increments the step to 1 before the
// bias correction (torch/optim/adam.py, _single_tensor_adam), from zero moments, as the DCP and Megatron
// resets (sources/dcp/reset_optimizer.h) leave them.
#include <string>

namespace ckptdoc::weights_folder {

struct FileReset {
  std::string file;        // "optimizer.pt"
  size_t params = 0;       // params whose state was reset
  size_t tensors = 0;      // moment and step tensors zeroed
  size_t records = 0;      // storage records rewritten
  double step_before = 0;  // the largest step the input held
};

// Zeroes in `copy_dir`/`file` (a byte copy of `in_dir`/`file`) every Adam moment and step the input holds,
// then re-reads the copy and checks that each reads back as zero. Throws ckptdoc::Error Unsupported naming
// the input file when it holds no state (saved before a first step: already a fresh optimizer's), a state
// field other than Adam's (another optimizer: zero is not its fresh state), a step that is not a tensor, a
// storage a tensor outside the state shares, or the legacy (non-zip) format; Corrupt / Io for a file that
// cannot be read or written.
FileReset reset_adam_file(const std::string& in_dir, const std::string& file, const std::string& copy_dir);

}  // namespace ckptdoc::weights_folder
