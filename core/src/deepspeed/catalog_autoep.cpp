// Catalog building: DeepSpeed's AutoEP layouts (0.19.3+). AutoEP keeps num_experts / ep of each MoE layer's
// experts on every rank under the same param names (ds_autoep_layers in the model files), and ZeRO-3
// partitions those experts over the expert-data-parallel group only (ds_zero_partition_groups in the
// optimizer files: a partition count per sub-group). One data-parallel size for every group would misread
// them, so the layout is refused with one problem instead; DeepSpeed's own zero_to_fp32.py refuses these
// checkpoints too.
#include <algorithm>
#include <set>

#include "deepspeed/catalog_builder.h"
#include "deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

bool CatalogBuilder::refuse_autoep_layout() {
  std::set<std::pair<size_t, int64_t>> odd;  // (sub-group, partition count) that differ from the layout's dp
  std::string file;
  for (const auto& [r, s] : optim_) {
    if (!s.has_partition_groups) continue;
    for (size_t g = 0; g < s.sub_group_partition_count.size(); ++g) {
      if (s.sub_group_partition_count[g] == layout_dp_) continue;
      odd.insert({g, s.sub_group_partition_count[g]});
      if (file.empty()) {
        const CheckpointFile* f = cat_.optim_file(r, 0);
        file = f ? f->path : std::string();
      }
    }
  }
  int layers = 0;
  int64_t ep = 0, experts = 0;
  if (const Value* autoep = model_ ? dict_get(&model_->root, "ds_autoep_layers") : nullptr;
      autoep && autoep->is_sequence()) {
    for (const auto& L : autoep->items()) {
      ++layers;
      ep = std::max(ep, opt_int(dict_get(&L, "ep_size")).value_or(0));
      experts = std::max(experts, opt_int(dict_get(&L, "num_experts")).value_or(0));
    }
  }
  if (odd.empty() && ep <= 1) return false;  // ep 1: every rank holds every expert, the usual layout reads it

  std::string why;
  if (!odd.empty()) {
    why = "ds_zero_partition_groups in the optimizer files partitions ";
    bool first = true;
    for (const auto& [g, c] : odd) {
      why += (first ? "" : ", ") + std::string("sub-group ") + std::to_string(g) + " over " +
             std::to_string(c) + (c == 1 ? " rank" : " ranks");
      first = false;
    }
    why += " where the other groups use dp " + std::to_string(layout_dp_);
  }
  if (ep > 1) {
    why += std::string(why.empty() ? "" : ", and ") + "ds_autoep_layers puts " +
           (experts > 0 ? std::to_string(experts / ep) + " of " + std::to_string(experts) + " experts"
                        : "a share of the experts") +
           " of each of " + std::to_string(layers) + " MoE layer" + (layers == 1 ? "" : "s") +
           " on each of " + std::to_string(ep) + " expert-parallel ranks under the same param names";
  }
  problem(
      "layout-unsupported", "error",
      "AutoEP checkpoint (DeepSpeed 0.19.3+): " + why +
          ". ckptdoc does not lay out or assemble AutoEP experts, so no partition was read as a flat group "
          "and no master, moment or weight was checked (one data-parallel size for every group would "
          "misread them). DeepSpeed's load_checkpoint reads it at the same expert placement and its "
          "ds_to_universal.py converts it; its zero_to_fp32.py refuses it",
      file.empty() && model_ ? model_->path : file);
  return true;
}

}  // namespace ckptdoc::deepspeed
