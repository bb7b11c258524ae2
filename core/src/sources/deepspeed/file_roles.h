#pragma once
// Recognising DeepSpeed rank files by name (deepspeed-format.md §2.1). Numbers are parsed, never compared
// as strings.
#include <optional>
#include <string_view>

#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed::detail {

struct FileNameInfo {
  FileRole role = FileRole::Other;
  int dp_rank = -1;
  int mp_rank = -1;  // layer files: the tensor rank of "-model_YY" (0 without it)
  int layer = -1;
  int expert = -1;
  int ep_rank = -1;       // expp_rank_K optimizer files
  bool tp_named = false;  // layer_XX-model_YY-model_states.pt
  bool bf16_prefix = false;
  bool zero3_model = false;     // zero_pp_rank_R_mp_rank_XX_model_states.pt
  bool old_optim_name = false;  // ..._mp_rank_XXoptim_states.pt
};

// nullopt when the name is not one DeepSpeed writes.
std::optional<FileNameInfo> classify_file_name(std::string_view file_name);

}  // namespace ckptdoc::deepspeed::detail
