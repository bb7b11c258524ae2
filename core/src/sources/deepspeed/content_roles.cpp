// Rank files by content (content_roles.h).
#include "sources/deepspeed/content_roles.h"

#include <fstream>

#include "ckptdoc/format/pickle_strings.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/mapped_file.h"
#include "sources/deepspeed/value_access.h"

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

namespace {

// Whether a torch.save zip's data.pkl spells a key classify_by_content needs. A rank file's root dict holds
// "module" or "optimizer_state_dict", and a pickle spells each str it holds whole before any memo get
// (pickle_strings.h), so a pickle spelling neither is no rank file and is not unpickled: a Trainer's
// optimizer.pt or Accelerate's optimizer.bin beside the weights is then unpickled once, by the diagnosis, not
// once more here, and its training_args.bin (which spells "optim_target_modules", not "module") not at all.
// Legacy files and unreadable zips: true (the full read decides).
bool may_name_rank_keys(const std::shared_ptr<const MappedFile>& file) {
  try {
    const ZipReader zip(file);
    for (const auto& e : zip.entries()) {
      const auto slash = e.name.find('/');
      if (slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
      const auto pickle = zip.data(e);
      return pickle_may_hold_str(pickle, "module") || pickle_may_hold_str(pickle, "optimizer_state_dict");
    }
  } catch (const std::exception&) {
  }
  return true;
}

}  // namespace

std::optional<ContentRole> classify_file_by_content(const std::string& path) {
  if (!classify_file_by_content_head(path)) return std::nullopt;
  try {
    const auto file = MappedFile::open(path);
    if (!may_name_rank_keys(file)) return std::nullopt;
    return classify_by_content(TorchFile::open(file));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace ckptdoc::deepspeed::detail
