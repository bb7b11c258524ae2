// Catalog building, part 3: param groups from param_shapes, their partition layout (§5), and the checks of
// that layout against what every rank saved (fp32 lengths, group_paddings, partition_count,
// param_slice_mappings, optimizer-state lengths). The lp tensors are checked in catalog_lp.cpp.
#include <algorithm>
#include <map>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/catalog_bounds.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/catalog_topology.h"
#include "sources/deepspeed/moment_lengths.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

std::vector<ParamEntry> entries_of(const Value* shapes, const std::string& file) {
  std::vector<ParamEntry> out;
  int64_t total = 0;
  for (const auto& [name, v] : str_items(shapes)) {
    ParamEntry p;
    p.name = name;
    p.shape = shape_of(v).value_or(std::vector<int64_t>{});
    p.numel = checked_numel(p.shape, file, "param_shapes['" + name + "']");
    total += p.numel;
    if (total > kMaxGroupNumel)
      throw Error(ErrorKind::Corrupt, file, "param_shapes",
                  "a group claims more than " + std::to_string(kMaxGroupNumel) + " elements");
    out.push_back(std::move(p));
  }
  return out;
}

std::string n(int64_t x) {
  return std::to_string(x);
}

// The per-group optimizer state entry (a dict of tensors) of a rank, for the wrappers that partition.
const Value* state_entry(const Value* osd, OptimizerWrapper w, int group) {
  if (w == OptimizerWrapper::Zero3) {
    return int_key(dict_get(dict_get(osd, "optimizer_state_dict"), "state"), group);
  }
  const Value* base = dict_get(osd, "base_optimizer_state");
  if (base && base->is_sequence()) return list_at(base, static_cast<size_t>(group));  // elastic
  return int_key(dict_get(base, "state"), group);
}

}  // namespace

std::vector<std::vector<ParamEntry>> CatalogBuilder::param_groups_from_shapes() {
  std::vector<std::vector<ParamEntry>> groups;
  const Value* shapes = model_ ? dict_get(&model_->root, "param_shapes") : nullptr;
  std::string file = shapes ? model_->path : old_param_shapes_file_;
  if (!shapes) shapes = old_param_shapes_;
  if (!shapes) return param_groups_from_slice_mappings();
  if (shapes->is_sequence()) {
    for (const auto& g : shapes->items()) groups.push_back(entries_of(&g, file));
    return groups;
  }
  // < v0.5.4: one OrderedDict for all params; split it by the saved fp32 totals per group.
  std::vector<ParamEntry> all = entries_of(shapes, file);
  std::vector<int64_t> totals;
  for (const auto& [r, s] : optim_) {
    for (size_t g = 0; g < s.fp32_numel.size(); ++g) {
      if (totals.size() <= g) totals.resize(g + 1, 0);
      totals[g] += std::max<int64_t>(s.fp32_numel[g], 0);
    }
  }
  if (totals.empty()) totals.push_back(0);
  size_t i = 0;
  for (size_t g = 0; g < totals.size(); ++g) {
    std::vector<ParamEntry> group;
    int64_t sum = 0;
    while (i < all.size() && (g + 1 == totals.size() || sum + all[i].numel <= totals[g])) {
      sum += all[i].numel;
      group.push_back(all[i++]);
    }
    groups.push_back(std::move(group));
  }
  problem(model::Code::LegacyParamShapes,
          "param_shapes is a single OrderedDict (DeepSpeed < 0.5.4); params were assigned to groups by the "
          "saved fp32 "
          "lengths");
  return groups;
}

void CatalogBuilder::build_groups() {
  const auto w = cat_.wrapper;
  if (w != OptimizerWrapper::Zero12 && w != OptimizerWrapper::Zero3 && w != OptimizerWrapper::BF16Optimizer)
    return;
  auto groups = param_groups_from_shapes();
  if (groups.empty()) {
    problem(model::Code::UnknownSchema,
            "no param_shapes in the model file (or, before DeepSpeed 0.6.0, the optimizer files): the flat "
            "partition "
            "layout cannot be derived");
    return;
  }
  if (layout_dp_ < 1) {
    problem(model::Code::WorldSizeMismatch,
            "the data-parallel world size is unknown (no partition_count, "
            "dp_world_size or optimizer files)");
    return;
  }
  const Zero12Rules rules = zero12_rules_for_version(cat_.ds_version);
  for (size_t g = 0; g < groups.size(); ++g) {
    int dp = layout_dp_;
    if (w != OptimizerWrapper::Zero3 && g < cat_.partition_count.size() && cat_.partition_count[g] > 0) {
      dp = cat_.partition_count[g];  // MoE expert groups use the expert-data-parallel size
    }
    const int index = static_cast<int>(g);
    if (w == OptimizerWrapper::Zero3) {
      cat_.groups.push_back(layout_zero3(index, std::move(groups[g]), dp));
    } else if (w == OptimizerWrapper::BF16Optimizer) {
      cat_.groups.push_back(layout_bf16_optimizer(index, std::move(groups[g]), dp));
    } else {
      auto params = std::move(groups[g]);
      if (rules.round_robin) {
        std::vector<ParamEntry> reordered;
        for (size_t i : round_robin_order(params.size(), dp)) reordered.push_back(params[i]);
        params = std::move(reordered);
      }
      cat_.groups.push_back(layout_zero12(index, std::move(params), dp, rules));
    }
    cat_.groups.back().file_group = index;
  }
  if (rules.round_robin && w == OptimizerWrapper::Zero12) {
    problem(model::Code::RoundRobinOrder, "DeepSpeed " + cat_.ds_version +
                                              " reordered params round-robin over ranks; the flat order was "
                                              "reconstructed from param_shapes");
  }
}

void CatalogBuilder::check_partitions() {
  const auto w = cat_.wrapper;
  if (cat_.groups.empty()) return;
  const Zero12Rules rules = zero12_rules_for_version(cat_.ds_version);
  const bool round_robin = rules.round_robin;
  std::vector<MomentLengthMismatch> moments_off;  // reported together below: one cause, one finding
  // The tensor state keys of each file group (a position in the rank files' lists), over all ranks: every
  // rank must hold them all (a rank without them would read as zeros in a re-partition, and its moments would
  // be lost).
  cat_.group_state_keys.assign(static_cast<size_t>(cat_.file_group_count()), {});
  for (const auto& [r, s] : optim_) {
    if (!s.osd || r < 0 || r >= layout_dp_) continue;
    for (int fg = 0; fg < cat_.file_group_count(); ++fg)
      for (const auto& [key, v] : str_items(state_entry(s.osd, w, fg))) {
        auto& keys = cat_.group_state_keys[static_cast<size_t>(fg)];
        if (key != "step" && v->is_tensor() && !v->as_tensor().shape.empty() &&
            std::find(keys.begin(), keys.end(), key) == keys.end())
          keys.push_back(key);
      }
  }
  for (const auto& [r, s] : optim_) {
    if (!s.osd || r < 0 || r >= layout_dp_) continue;
    const CheckpointFile* f = cat_.optim_file(r, 0);
    const std::string file = f ? f->path : std::string();
    if (s.fp32_numel.size() != static_cast<size_t>(cat_.file_group_count())) {
      problem(model::Code::ShapeMismatch,
              file + " holds " + n(static_cast<int64_t>(s.fp32_numel.size())) +
                  " fp32 groups but param_shapes lists " + n(cat_.file_group_count()),
              file, {r});
    }
    if (!s.partition_count.empty() &&
        s.partition_count != std::vector<int64_t>(cat_.partition_count.begin(), cat_.partition_count.end())) {
      problem(model::Code::WorldSizeMismatch, file + " has a partition_count different from the other ranks'",
              file, {r});
    }
    for (int fg = 0; fg < cat_.file_group_count(); ++fg) {
      const GroupLayout* Gp =
          cat_.group_in_file(fg, r);  // expert groups: the instance of this rank's ep rank
      if (!Gp) continue;
      const GroupLayout& G = *Gp;
      const auto g = static_cast<size_t>(fg);
      const int part = G.partition_index(r);
      const RankPartition& rp = G.partitions[static_cast<size_t>(part)];
      const std::string where = "group " + n(static_cast<int64_t>(g)) + " on dp rank " + n(r);
      if (g < s.fp32_numel.size() && s.fp32_numel[g] != rp.saved_numel) {
        problem(model::Code::ShapeMismatch,
                "the fp32 partition of " + where + " has " + n(s.fp32_numel[g]) +
                    " elements; the layout for " + n(static_cast<int64_t>(G.partitions.size())) +
                    " ranks expects " + n(rp.saved_numel),
                file, {r});
      }
      if (s.group_paddings && g < s.group_paddings->size() && (*s.group_paddings)[g] != rp.recorded_padding) {
        problem(model::Code::LayoutMismatch,
                "group_paddings of " + where + " is " + n((*s.group_paddings)[g]) + ", the layout expects " +
                    n(rp.recorded_padding),
                file, {r});
      }
      if (s.has_slice_mappings && !round_robin) {
        std::map<std::string, std::pair<int64_t, int64_t>> want, got;
        // Expert groups before v0.14.5: DeepSpeed's window is padded numel / the whole dp size (PR #5681).
        const bool global_dp = G.expert && rules.expert_mappings_use_global_dp && layout_dp_ > 0;
        const int64_t window = global_dp ? G.padded_numel / layout_dp_ : G.partition_numel;
        for (const auto& m :
             global_dp ? slice_mappings_in(G, part * window, window) : expected_slice_mappings(G, part))
          want[m.name] = {m.numel, m.start};
        if (g < s.slice_mappings.size()) {
          // The files name experts by their local id; the catalog by their global one.
          for (const auto& m : s.slice_mappings[g])
            got[G.expert ? global_expert_name(cat_.topology, m.name, G.ep_rank) : m.name] = {m.numel,
                                                                                             m.start};
        }
        if (want != got) {
          std::vector<std::string> params;
          for (const auto& [k, v] : want) {
            if (!got.count(k) || got[k] != v) params.push_back(k);
          }
          for (const auto& [k, v] : got) {
            if (!want.count(k)) params.push_back(k);
          }
          problem(model::Code::LayoutMismatch,
                  "param_slice_mappings of " + where + " disagree with the layout derived from param_shapes",
                  file, {r}, params);
        }
      }
      // Optimizer state tensors have the full partition length (rigid) or the lean one (elastic). Only `step`
      // and 0-dim scalars are not partitioned: a 1-element tensor is a (tiny) ZeRO-3 partition and is
      // checked.
      const Value* entry = state_entry(s.osd, w, fg);
      const bool elastic = w != OptimizerWrapper::Zero3 && dict_get(s.osd, "base_optimizer_state") &&
                           dict_get(s.osd, "base_optimizer_state")->is_sequence();
      for (const auto& key : cat_.group_state_keys[g]) {
        const Value* v = dict_get(entry, key);
        if (!v || !v->is_tensor()) {
          std::string message = file;  // appended piece by piece: this runs per key of every rank
          message += ": optimizer state '";
          message += key;
          message += "' of ";
          message += where;
          message += " is missing while other ranks hold it: that rank's ";
          message += key;
          message +=
              " is lost (a repair would not invent it; --reset-optimizer restarts every rank's state "
              "together)";
          problem(model::Code::OptimizerStateIncomplete, std::move(message), file, {r});
        }
      }
      for (const auto& [key, v] : str_items(entry)) {
        const auto len = tensor_numel(v);
        if (!len || key == "step" || !v->is_tensor() || v->as_tensor().shape.empty()) continue;
        const int64_t expect = elastic ? rp.saved_numel : G.partition_numel;
        if (*len != expect) moments_off.push_back({r, fg, key, file, *len, expect});
      }
    }
  }
  for (auto& p : moment_length_problems(moments_off))
    problem(model::code_of(p.code), p.severity, std::move(p.message), std::move(p.file), std::move(p.ranks));
}

}  // namespace ckptdoc::deepspeed
