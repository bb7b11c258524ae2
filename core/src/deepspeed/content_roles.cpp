// Rank files by content (content_roles.h).
#include "deepspeed/content_roles.h"

#include <fstream>

#include "deepspeed/value_access.h"

namespace ckptdoc::deepspeed::detail {

std::optional<ContentRole> classify_by_content(const TorchFile& file) {
  const Value* root = &file.root;
  if (!root->is_dict()) return std::nullopt;
  ContentRole c;
  if (const Value* osd = dict_get(root, "optimizer_state_dict"); osd && osd->is_dict()) {
    const bool zero = dict_get(osd, "zero_stage") != nullptr;
    const bool single = dict_get(osd, "single_partition_of_fp32_groups") != nullptr;
    const bool flat = dict_get(osd, "fp32_flat_groups") != nullptr;
    if (!zero && !single && !flat && !dict_get(osd, "partition_count") &&
        !dict_get(osd, "base_optimizer_state"))
      return std::nullopt;
    c.role = FileRole::Optim;
    c.zero3 = flat;
    c.bf16_optimizer = single && !zero;
    return c;
  }
  if (dict_get(root, "module")) {
    bool bookkeeping = false;
    for (const char* k :
         {"dp_world_size", "mp_world_size", "param_shapes", "ds_config", "ds_version", "buffer_names"})
      bookkeeping = bookkeeping || dict_get(root, k) != nullptr;
    if (!bookkeeping) return std::nullopt;  // a plain state dict with a `module` key is not a DeepSpeed file
    c.role = FileRole::Model;
    c.zero3 =
        opt_int(dict_get(dict_get(dict_get(root, "ds_config"), "zero_optimization"), "stage")).value_or(0) ==
        3;
    return c;
  }
  return std::nullopt;
}

bool classify_file_by_content_head(const std::string& path) {
  char head[16] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(head, sizeof head);
  return in.gcount() >= 4 && TorchFile::is_torch_file(std::span(reinterpret_cast<const uint8_t*>(head),
                                                                static_cast<size_t>(in.gcount())));
}

std::optional<ContentRole> classify_file_by_content(const std::string& path) {
  if (!classify_file_by_content_head(path)) return std::nullopt;
  try {
    return classify_by_content(TorchFile::open(path));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace ckptdoc::deepspeed::detail
