// The neutral description of a DeepSpeed-family catalog (catalog_describe.h): the words the overviews and
// layout views have always printed, now written here once from the DeepSpeed-only fields.
#include "sources/deepspeed/catalog_describe.h"

#include <string>

#include "sources/deepspeed/deepspeed_rules.h"

namespace ckptdoc::deepspeed::detail {

void describe_for_front_ends(Catalog& c) {
  c.convertible = !c.weights_only && !c.universal;
  c.lp_weights_elsewhere = c.wrapper == OptimizerWrapper::Zero3;
  c.compares_lp_source = c.lp_weights_elsewhere && !c.autoep;
  c.has_optimizer = c.wrapper != OptimizerWrapper::None;
  c.module_weights_file = !c.weights_only && !c.universal;
  c.dp_independent = c.universal.has_value();
  c.writer_version = c.ds_version;
  c.file_count = c.files.size();
  c.file_bytes = 0;
  for (const auto& f : c.files) c.file_bytes += f.bytes;
  // A weights source holds no optimizer state and was never partitioned: no ZeRO stage to speak of.
  c.partitioning_text = c.weights_only ? "" : "ZeRO stage " + std::to_string(c.zero_stage);
  c.optimizer_class = std::string(wrapper_name(c.wrapper));
  c.optimizer_text = c.optimizer_class;
  if (!c.partitioning_text.empty()) c.optimizer_text += ", " + c.partitioning_text;
  if (!c.optimizer_name_hint.empty()) c.optimizer_text += " (" + c.optimizer_name_hint + ")";
  c.facts.clear();
  if (!c.ds_version.empty()) c.facts.push_back({"DeepSpeed", c.ds_version});
  c.sharding_stage = c.zero_stage;
  c.source_rules = rules_of(c);
}

}  // namespace ckptdoc::deepspeed::detail
