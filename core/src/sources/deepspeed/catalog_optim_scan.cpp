// Catalog building, part 2: optimizer-states files (§4) — schema, wrapper, stage, per-rank lengths and
// bookkeeping, loss scaler and optimizer step.
#include <algorithm>
#include <optional>

#include "ckptdoc/format/known_objects.h"
#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/catalog_bounds.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

// A saved step count as an integer; nullopt for values no step counter can hold (damaged or hostile files:
// converting them would be undefined behaviour).
std::optional<int64_t> step_count(double v) {
  if (!(v >= 0.0 && v <= 9.0e15)) return std::nullopt;  // also rejects NaN
  return static_cast<int64_t>(v);
}

std::vector<int64_t> int_list(const Value* v) {
  std::vector<int64_t> out;
  if (auto i = opt_int(v)) {
    out.push_back(*i);
  } else if (v && v->is_sequence()) {
    for (const auto& item : v->items()) out.push_back(opt_int(&item).value_or(0));
  }
  return out;
}

}  // namespace

void CatalogBuilder::scan_optim_files() {
  for (const auto& f : cat_.files) {
    if (f.role != FileRole::Optim || f.mp_rank != cat_.mp_rank) continue;
    OptimRankScan s;
    s.dp_rank = f.dp_rank;
    s.file = try_open(f);
    if (s.file) {
      const Value* root = &s.file->root;
      s.osd = dict_get(root, "optimizer_state_dict");
      if (!s.osd || !s.osd->is_dict()) {
        problem(model::Code::UnknownSchema, f.path + " has no optimizer_state_dict dict", f.path,
                {f.dp_rank});
        s.file = nullptr;
        s.osd = nullptr;
      }
    }
    if (s.osd) {
      const Value* osd = s.osd;
      if (const auto z = opt_int(dict_get(osd, "zero_stage")))
        s.zero_stage = checked_count(z, 0, 3, f.abs_path, "key 'optimizer_state_dict.zero_stage'");
      const Value* fp32 = dict_get(osd, "single_partition_of_fp32_groups");
      s.has_single_partition = fp32 != nullptr;
      if (const Value* z3 = dict_get(osd, "fp32_flat_groups")) {
        s.has_fp32_flat_groups = true;
        fp32 = z3;
      }
      s.has_legacy_sub_partitions = dict_get(osd, "local_sub_partitions_of_fp32_groups") != nullptr;
      if (fp32 && fp32->is_sequence()) {
        for (const auto& t : fp32->items()) s.fp32_numel.push_back(tensor_numel(&t).value_or(-1));
      }
      const Value* pads = dict_get(osd, "group_paddings");
      if (!pads) pads = dict_get(osd, "groups_padding");  // v0.6.2-v0.6.7 BF16_Optimizer
      if (pads) s.group_paddings = int_list(pads);
      s.partition_count = int_list(dict_get(osd, "partition_count"));
      for (size_t g = 0; g < s.partition_count.size(); ++g)
        checked_count(s.partition_count[g], 0, kMaxWorldSize, f.abs_path,
                      "key 'optimizer_state_dict.partition_count'" +
                          (s.partition_count.size() > 1 ? "[" + std::to_string(g) + "]" : std::string()));
      const Value* inner = dict_get(osd, "base_optimizer_state");
      if (!inner || !inner->is_dict()) inner = dict_get(osd, "optimizer_state_dict");
      if (const Value* pgs = dict_get(inner, "param_groups"); pgs && pgs->is_sequence())
        for (const auto& pg : pgs->items()) {
          s.group_names.push_back(opt_str(dict_get(&pg, "name")).value_or(""));
          s.group_moe.push_back(opt_bool(dict_get(&pg, "moe")).value_or(false));
        }
      if (const Value* maps = dict_get(osd, "param_slice_mappings"); maps && maps->is_sequence()) {
        s.has_slice_mappings = true;
        for (const auto& g : maps->items()) {
          std::vector<SliceMapping> group;
          for (const auto& [name, fa] : str_items(&g)) {
            const auto addr = fragment_address_of(*fa);
            group.push_back(
                SliceMapping{name, addr ? addr->first : opt_int(attr_or_key(fa, "numel")).value_or(-1),
                             addr ? addr->second : opt_int(attr_or_key(fa, "start")).value_or(-1)});
          }
          s.slice_mappings.push_back(std::move(group));
        }
      }
      if (const Value* pg = dict_get(osd, "ds_zero_partition_groups"); pg && pg->is_sequence()) {
        s.has_partition_groups = true;
        for (const auto& g : pg->items())
          s.sub_group_partition_count.push_back(opt_int(dict_get(&g, "partition_count")).value_or(-1));
      }
      s.ds_version = opt_str(dict_get(osd, "ds_version"))
                         .value_or(opt_str(dict_get(&s.file->root, "ds_version")).value_or(""));
      if (!old_param_shapes_) {
        old_param_shapes_ = dict_get(&s.file->root, "param_shapes");
        if (old_param_shapes_) old_param_shapes_file_ = f.abs_path;
      }
    }
    optim_[f.dp_rank] = std::move(s);
  }
}

void CatalogBuilder::decide_wrapper() {
  const OptimRankScan* first = nullptr;
  for (const auto& [r, s] : optim_) {
    if (s.osd) {
      first = &s;
      break;
    }
  }
  const Value* config = model_ ? dict_get(&model_->root, "ds_config") : nullptr;
  if (!config && first) config = dict_get(&first->file->root, "ds_config");
  std::optional<int64_t> config_stage = opt_int(dict_get(dict_get(config, "zero_optimization"), "stage"));
  if (config_stage)
    config_stage = checked_count(config_stage, 0, 3,
                                 model_  ? model_->path
                                 : first ? first->file->path
                                         : cat_.tag_dir,
                                 "key 'ds_config.zero_optimization.stage'");
  if (cat_.ds_version.empty() && first) cat_.ds_version = first->ds_version;

  if (first) {
    if (first->zero_stage) {
      if (first->has_fp32_flat_groups) {
        cat_.wrapper = OptimizerWrapper::Zero3;
        cat_.zero_stage = 3;
      } else {
        cat_.wrapper = OptimizerWrapper::Zero12;
        // <= v0.6.7 wrote the int 2 for stage 1 and 2 alike; the config knows better.
        cat_.zero_stage = static_cast<int>(*first->zero_stage);
        if (config_stage && (*config_stage == 1 || *config_stage == 2))
          cat_.zero_stage = static_cast<int>(*config_stage);
      }
    } else if (first->has_single_partition) {
      cat_.wrapper = OptimizerWrapper::BF16Optimizer;
      cat_.zero_stage = static_cast<int>(config_stage.value_or(0));
    } else {
      cat_.wrapper = OptimizerWrapper::Unknown;
      cat_.zero_stage = static_cast<int>(config_stage.value_or(first->has_legacy_sub_partitions ? 1 : 0));
      problem(model::Code::UnknownSchema,
              first->has_legacy_sub_partitions
                  ? "legacy ZeRO-1 optimizer files (local_sub_partitions_of_fp32_groups, DeepSpeed <= "
                    "0.3.16) are not "
                    "supported"
                  : "the optimizer files hold neither single_partition_of_fp32_groups nor fp32_flat_groups");
    }
    return;
  }
  const Value* opt = model_ ? dict_get(&model_->root, "optimizer") : nullptr;
  if (opt && opt->is_dict()) {
    if (dict_get(opt, "fp32_groups_flat")) {
      cat_.wrapper = OptimizerWrapper::FP16Optimizer;
    } else if (dict_get(opt, "fp32_groups")) {
      cat_.wrapper = OptimizerWrapper::FP16UnfusedOptimizer;
    } else if (dict_get(opt, "param_groups")) {
      cat_.wrapper = OptimizerWrapper::TorchOptimizer;
    } else {
      cat_.wrapper = OptimizerWrapper::Unknown;
    }
    cat_.zero_stage = 0;
    return;
  }
  const bool has_optim_files = std::any_of(cat_.files.begin(), cat_.files.end(),
                                           [](const CheckpointFile& f) { return f.role == FileRole::Optim; });
  cat_.wrapper = has_optim_files ? OptimizerWrapper::Unknown : OptimizerWrapper::None;
  cat_.zero_stage = static_cast<int>(config_stage.value_or(0));
}

// Per flat group: the Adam step and betas the optimizer rules weigh the moments against. ZeRO-3 keys its
// state by sub-group and lists the sub-groups of each param group in `params`; the other wrappers key both by
// group.
void CatalogBuilder::read_optimizer_groups(const Value* inner) {
  const Value* state = dict_get(inner, "state");
  const Value* groups = dict_get(inner, "param_groups");
  const size_t n = cat_.groups.size();
  cat_.optimizer_groups.assign(n, OptimizerGroupState{});
  for (size_t gi = 0; gi < n; ++gi) {
    auto& out = cat_.optimizer_groups[gi];
    // The first readable rank's file: an expert group's other expert-parallel instances step alike.
    const auto g = static_cast<size_t>(cat_.groups[gi].file_group);
    if (const Value* entry = int_key(state, static_cast<int64_t>(g))) {
      out.has_state = true;
      if (auto s = scalar_value(dict_get(entry, "step"))) out.step = step_count(*s);
    }
    const Value* pg = nullptr;
    // ZeRO-3 and FP16_UnfusedOptimizer: flat groups are entries of the torch optimizer's groups' `params`.
    if (cat_.wrapper == OptimizerWrapper::Zero3 || cat_.wrapper == OptimizerWrapper::FP16UnfusedOptimizer) {
      for (size_t i = 0; groups && groups->is_sequence() && i < groups->items().size() && !pg; ++i)
        for (const auto& id : int_list(dict_get(&groups->items()[i], "params")))
          if (id == static_cast<int64_t>(g)) pg = &groups->items()[i];
    } else {
      pg = list_at(groups, g);
    }
    if (!out.step) {
      if (auto s = scalar_value(dict_get(pg, "step"))) out.step = step_count(*s);  // FusedAdam keeps it there
    }
    if (const Value* betas = dict_get(pg, "betas")) {
      const auto b1 = opt_float(list_at(betas, 0)), b2 = opt_float(list_at(betas, 1));
      if (b1 && *b1 >= 0.0 && *b1 < 1.0) out.beta1 = *b1;
      if (b2 && *b2 >= 0.0 && *b2 < 1.0) out.beta2 = *b2;
    }
  }
}

void CatalogBuilder::read_optimizer_summary(const Value* osd) {
  for (const auto& [r, s] : optim_) {
    if (osd) break;
    if (s.osd) {
      osd = s.osd;
      break;
    }
  }
  if (!osd && model_) osd = dict_get(&model_->root, "optimizer");
  if (!osd) return;

  // Loss scaler: an object (ZeRO) or flat keys (FP16_Optimizer).
  const Value* ls = dict_get(osd, "loss_scaler");
  const Value* src = ls ? ls : (dict_get(osd, "cur_scale") ? osd : nullptr);
  if (src) {
    auto& L = cat_.loss_scaler;
    L.present = true;
    L.cur_scale = opt_float(attr_or_key(src, "cur_scale")).value_or(0);
    L.min_scale = opt_float(attr_or_key(src, "min_scale")).value_or(0);
    L.cur_iter = opt_int(attr_or_key(src, "cur_iter")).value_or(0);
    L.last_overflow_iter = opt_int(attr_or_key(src, "last_overflow_iter")).value_or(-1);
    auto dyn = opt_bool(attr_or_key(src, "dynamic"));
    if (!dyn) dyn = opt_bool(dict_get(osd, "dynamic_loss_scale"));
    if (!dyn && ls && ls->is(Value::Kind::Object)) dyn = ls->as_object().name == "DynamicLossScaler";
    L.dynamic = dyn.value_or(false);
  }

  // The wrapped torch optimizer's state dict.
  const Value* inner = dict_get(osd, "base_optimizer_state");
  if (!inner) inner = dict_get(osd, "optimizer_state_dict");
  if (!inner) return;
  const Value* state = dict_get(inner, "state");
  const Value* entry = nullptr;
  if (state && state->is_dict()) {
    entry = int_key(state, 0);
  } else if (inner->is_sequence()) {
    entry = list_at(inner, 0);  // elastic: one lean state dict per group
  }
  if (entry) {
    for (const auto& [k, v] : str_items(entry)) {
      if (k == "step") {
        if (auto s = scalar_value(v)) cat_.optimizer_step = step_count(*s);
      } else {
        cat_.optimizer_state_keys.push_back(k);
      }
    }
  }
  read_optimizer_groups(inner);
  if (!cat_.optimizer_step) {
    if (auto s = scalar_value(dict_get(list_at(dict_get(inner, "param_groups"), 0), "step"))) {
      cat_.optimizer_step = step_count(*s);
    } else if (auto s2 = scalar_value(dict_get(osd, "base_optimizer_state_step"))) {
      cat_.optimizer_step = step_count(*s2);
    }
  }
}

}  // namespace ckptdoc::deepspeed
