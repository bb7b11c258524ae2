// A run that trained with an optimizer but whose checkpoint holds no optimizer state (catalog_builder.h).
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "sources/deepspeed/catalog_builder.h"

namespace ckptdoc::deepspeed {

// DeepSpeed 0.17.6-0.18.4 treat bf16 at ZeRO stage 0 as if a ZeRO optimizer saved the state: the model file's
// `optimizer` is None and no optimizer file is written (DeepSpeed #7571/#7786, fixed in 0.18.5). Resuming
// such a checkpoint in those versions keeps the fresh engine's fp32 masters, and the first step writes them
// over the weights: measured with 0.18.4 at dp 2 (docs/reference.md), the #762 state again.
void CatalogBuilder::note_optimizer_not_saved() {
  // ZeRO 1-3 without optimizer files is optimizer-state-missing (analysis/rules.cpp): a weights-only save.
  if (cat_.wrapper != OptimizerWrapper::None || cat_.zero_stage != 0 || !model_ ||
      cat_.optimizer_name_hint.empty())
    return;
  const Value* opt = model_->root.is_dict() ? model_->root.get("optimizer") : nullptr;
  if (!opt || !opt->is_none()) return;  // the key is there, and None
  const auto v = parse_ds_version(cat_.ds_version);
  const bool known_bug =
      v && *v >= DsVersion{0, 17, 6} && *v <= DsVersion{0, 18, 4} && cat_.lp_dtype == DType::BF16;
  std::string msg =
      "the run trained with " + cat_.optimizer_name_hint +
      " (ds_config), but this checkpoint holds no optimizer state: the model file's `optimizer` is "
      "None and there is no optimizer file, so there is no fp32 master and no moment to check.";
  if (known_bug)
    msg +=
        " DeepSpeed " + cat_.ds_version +
        " saves none with bf16 at ZeRO stage 0 (DeepSpeed #7571, fixed in 0.18.5). Resuming it with "
        "load_checkpoint in 0.17.6-0.18.4 keeps the new engine's initial fp32 masters, and the first step "
        "writes them over these weights. The bf16 weights are saved: resume with "
        "load_checkpoint(..., load_module_only=True), which refreshes the masters from them (Adam restarts "
        "from zero moments), or export them (export --source lp).";
  else
    msg +=
        " A resume restarts the optimizer from nothing; the 16-bit weights are readable (export --source "
        "lp).";
  problem(model::Code::OptimizerStateNotSaved, std::move(msg), model_->path);
}

}  // namespace ckptdoc::deepspeed
