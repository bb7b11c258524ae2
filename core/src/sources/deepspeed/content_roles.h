#pragma once
// Recognising DeepSpeed rank files by what they hold, for files whose names do not say (renamed, copied out
// of their folder): a model-states file is a dict with `module` and DeepSpeed's bookkeeping keys, an
// optimizer-states file one with an `optimizer_state_dict` of a ZeRO/BF16 optimizer. Only the pickle is read.
#include <optional>
#include <string>

#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed::detail {

struct ContentRole {
  FileRole role = FileRole::Other;  // Model or Optim
  bool zero3 = false;               // a ZeRO-3 file (named per dp rank)
  bool bf16_optimizer = false;      // BF16_Optimizer optimizer file (DeepSpeed prefixes its name with bf16_)
};

// What a parsed torch file is to DeepSpeed, by its keys; nullopt when it is not a model or optimizer file.
std::optional<ContentRole> classify_by_content(const TorchFile& file);

// Whether a file on disk starts like a torch.save file (zip or legacy stream): cheap, reads 16 bytes.
bool classify_file_by_content_head(const std::string& path);

// The same for a file on disk: nullopt also when it is not a torch file or cannot be read.
std::optional<ContentRole> classify_file_by_content(const std::string& path);

}  // namespace ckptdoc::deepspeed::detail
