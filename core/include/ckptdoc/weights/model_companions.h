#pragma once
// The small files a Hugging Face model folder keeps beside its weights (config.json, generation_config.json,
// the tokenizer's files), which from_pretrained needs to load the weights. A Trainer checkpoint-N/ folder
// holds them; an export of it into a folder takes them along, so the folder loads as a model without hand
// copying.
#include <string>
#include <vector>

namespace ckptdoc::weights {

// The companion files present in `folder`, in a fixed order; empty unless the folder holds config.json
// (without a config there is no model folder to complete).
std::vector<std::string> model_companions(const std::string& folder);

struct CompanionCopy {
  std::vector<std::string> copied;     // written into the target folder
  std::vector<std::string> same;       // already there with the same bytes
  std::vector<std::string> different;  // already there with other bytes: kept, never replaced
};

// Copies `names` from `from` into the existing folder `to`. A file already in `to` is never replaced (another
// writer's, or the user's own edit): it is listed as `same` or `different`. Each copy appears whole or not at
// all. Throws ckptdoc::Error naming the file when one cannot be read or written.
CompanionCopy copy_companions(const std::string& from, const std::string& to,
                              const std::vector<std::string>& names);

}  // namespace ckptdoc::weights
