// has_only_module_weights / scan_module_weights (module_weights_scan.h).
#include "sources/deepspeed/module_weights_scan.h"

#include "analysis/weights_diagnose.h"
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/sources/deepspeed/module_weights.h"

namespace ckptdoc::deepspeed::detail {

using analysis::DiagnoseOptions;
using analysis::Report;
using analysis::TensorToScan;

bool has_only_module_weights(const deepspeed::Checkpoint& ckpt) {
  const model::Catalog& c = ckpt.catalog();
  return c.module_weights_file && c.groups.empty() && !c.module_keys.empty() &&
         deepspeed::has_module_weights_file(ckpt);
}

Report scan_module_weights(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options,
                           Progress* progress) {
  deepspeed::ModuleWeights weights = deepspeed::module_weights(ckpt);
  std::vector<TensorToScan> tensors;
  for (auto& [name, tensor] : weights.tensors) tensors.push_back({name, std::move(tensor), weights.file});
  return diagnose_tensors(tensors, options, progress);
}

}  // namespace ckptdoc::deepspeed::detail
