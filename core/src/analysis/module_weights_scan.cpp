// has_only_module_weights / scan_module_weights (module_weights_scan.h).
#include "analysis/module_weights_scan.h"

#include "analysis/weights_diagnose.h"
#include "deepspeed/value_access.h"

namespace ckptdoc::analysis {

bool has_only_module_weights(const deepspeed::Checkpoint& ckpt) {
  const deepspeed::Catalog& c = ckpt.catalog();
  return !ckpt.weights_only() && !c.universal && c.groups.empty() && !c.module_keys.empty() &&
         c.model_file() != nullptr;
}

Report scan_module_weights(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options,
                           Progress* progress) {
  const TorchFile& model = ckpt.model_file();
  const std::string file = ckpt.catalog().model_file()->path;
  std::vector<TensorToScan> tensors;
  // Entries that are not tensors (none in DeepSpeed's own modules) are not weights: nothing to read.
  for (const auto& [name, value] :
       deepspeed::detail::str_items(deepspeed::detail::dict_get(&model.root, "module")))
    if (value->is_tensor()) tensors.push_back({name, value->as_tensor(), file});
  return diagnose_tensors(tensors, options, progress);
}

}  // namespace ckptdoc::analysis
