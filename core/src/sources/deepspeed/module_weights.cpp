#include "ckptdoc/sources/deepspeed/module_weights.h"

#include "ckptdoc/error.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

bool has_module_weights_file(const Checkpoint& ckpt) {
  return ckpt.catalog().model_file() != nullptr;
}

ModuleWeights module_weights(const Checkpoint& ckpt) {
  const CheckpointFile* listed = ckpt.catalog().model_file();
  if (!listed) throw Error(ErrorKind::NotFound, ckpt.catalog().tag_dir, "", "no model file of this rank");
  ModuleWeights out;
  out.file = listed->path;
  const TorchFile& model = ckpt.model_file();
  for (const auto& [name, value] : detail::str_items(detail::dict_get(&model.root, "module")))
    if (value->is_tensor()) out.tensors.emplace_back(name, value->as_tensor());
  return out;
}

}  // namespace ckptdoc::deepspeed
