// Catalog building, MoE part (deepspeed-format.md §8.3). DeepSpeed's MoE model file (_save_moe_checkpoint)
// has no param_shapes: the groups are rebuilt from every rank's param_slice_mappings, with shapes from the
// module and the expert files. An expert group is partitioned over the expert-data-parallel ranks and each
// expert-parallel rank holds other experts: it becomes one GroupLayout per expert-parallel rank, params named
// by global expert id, and partition k of expert-parallel rank e sits in dp rank e + k * ep (DeepSpeed's
// default groups, utils/groups.py::_create_expert_and_data_parallel). Then the expert files are checked
// against num_experts.
#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/catalog_topology.h"
#include "sources/deepspeed/module_entries.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

std::string n(int64_t x) {
  return std::to_string(x);
}

std::optional<int> ep_size_from_name(const std::string& group_name) {
  static const std::regex re(R"(^ep_size_(\d{1,6})$)");
  std::smatch m;
  if (!std::regex_match(group_name, m, re)) return std::nullopt;
  return std::stoi(m[1].str());
}

}  // namespace

// The shape of a module entry of expert-parallel rank 0 (whose local expert ids are the global ones).
std::optional<std::vector<int64_t>> CatalogBuilder::entry_shape(const std::string& name) {
  const Value* t = nullptr;
  if (expert_of(cat_.topology, name).first >= 0) {
    if (auto loc = locate_module_entry(cat_, name); loc && loc->file) {
      const TorchFile* f = try_open(*loc->file);
      t = f ? dict_get(&f->root, loc->key) : nullptr;
    }
  } else if (model_) {
    t = dict_get(dict_get(&model_->root, "module"), name);
  }
  if (!t || !t->is_tensor()) return std::nullopt;
  return t->as_tensor().shape;
}

// The expert params an expert group holds, in model order (MoE layer by layer, local expert by expert, each
// expert's params in its state-dict order), keeping the params whose name after the expert id is in
// `suffixes` (empty: all). Read from expert-parallel rank 0's expert files.
std::vector<std::string> CatalogBuilder::expert_group_order(const std::set<int>& layers, int ep_size,
                                                            const std::set<std::string>& suffixes,
                                                            int per_rank) {
  std::vector<std::string> out;
  for (const auto& L : cat_.topology.moe_layers) {
    if (!layers.count(L.id) || ep_size < 1) continue;
    const int local = per_rank > 0 ? per_rank : L.num_experts / ep_size;
    for (int e = 0; e < local; ++e) {
      const auto loc = locate_module_entry(cat_, L.prefix + std::to_string(e) + ".x");
      const TorchFile* f = loc && loc->file ? try_open(*loc->file) : nullptr;
      if (!f) return {};
      const std::string head = L.prefix + std::to_string(e) + ".";
      for (const auto& [key, v] : str_items(&f->root))
        if (key.rfind(head, 0) == 0 && (suffixes.empty() || suffixes.count(key.substr(head.size()))))
          out.push_back(key);
    }
  }
  return out;
}

std::vector<std::vector<ParamEntry>> CatalogBuilder::param_groups_from_slice_mappings() {
  std::vector<std::vector<ParamEntry>> groups;
  if (!cat_.topology.moe()) return groups;  // other jobs always save param_shapes (>= 0.6.0): a damaged file
  const OptimRankScan* first = nullptr;
  for (const auto& [r, s] : optim_)
    if (s.has_slice_mappings && (!first || r < first->dp_rank)) first = &s;
  if (!first) return groups;
  const int D = layout_dp_ > 0 ? layout_dp_ : static_cast<int>(optim_.size());
  const bool global_dp = zero12_rules_for_version(cat_.ds_version).expert_mappings_use_global_dp;
  for (size_t g = 0; g < first->slice_mappings.size(); ++g) {
    const int pc =
        g < cat_.partition_count.size() && cat_.partition_count[g] > 0 ? cat_.partition_count[g] : D;
    const int E = std::max(1, D / std::max(pc, 1));
    // Partition length: the rigid Adam state has it in full; else rank 0's fp32 (lean only on tail ranks).
    int64_t P = g < first->fp32_numel.size() ? first->fp32_numel[g] : 0;
    if (const Value* st =
            int_key(dict_get(dict_get(first->osd, "base_optimizer_state"), "state"), static_cast<int64_t>(g)))
      if (auto len = tensor_numel(dict_get(st, "exp_avg"))) P = *len;
    // The window each partition's mappings describe (DeepSpeed < 0.14.5: padded / whole dp for expert
    // groups).
    const int64_t window = E > 1 && global_dp ? P * pc / D : P;
    int64_t N = 0;  // elements of the group: the lean fp32 partitions of expert-parallel rank 0
    std::map<std::string, std::pair<int64_t, int64_t>> at;  // name -> (first flat offset, numel)
    for (const auto& [r, s] : optim_) {
      if (r % E != 0 || g >= s.slice_mappings.size()) continue;  // expert-parallel rank 0's partitions
      if (g < s.fp32_numel.size()) N += std::max<int64_t>(s.fp32_numel[g], 0);
      const int64_t base = static_cast<int64_t>(r / E) * window;
      for (const auto& m : s.slice_mappings[g]) {
        auto [it, fresh] = at.try_emplace(m.name, base + m.start, 0);
        if (!fresh) it->second.first = std::min(it->second.first, base + m.start);
        it->second.second += m.numel;
      }
    }
    std::vector<std::pair<int64_t, std::string>> ordered;
    ordered.reserve(at.size());
    for (const auto& [name, where] : at) ordered.emplace_back(where.first, name);
    std::sort(ordered.begin(), ordered.end());
    std::vector<std::string> names;
    names.reserve(ordered.size());
    for (const auto& [off, name] : ordered) names.push_back(name);
    auto numel_of = [this](const std::string& name) {
      const auto shape = entry_shape(name);
      return shape ? shape_numel(*shape) : int64_t{-1};
    };
    int64_t covered = 0;
    for (const auto& name : names) covered += std::max<int64_t>(numel_of(name), 0);
    if (E > 1 && covered != N) {
      // The mappings cover only part of the group (the DeepSpeed bug above): the rest is the following
      // experts' params, in model order.
      std::set<int> layers;
      std::map<int, std::set<std::string>> suffixes;
      for (const auto& name : names)
        if (const auto [layer, id] = expert_of(cat_.topology, name); layer >= 0) {
          layers.insert(layer);
          const auto& L = cat_.topology.moe_layers[static_cast<size_t>(layer)];
          suffixes[layer].insert(name.substr(L.prefix.size() + std::to_string(id).size() + 1));
        }
      std::set<std::string> seen;
      for (const auto& [layer, sfx] : suffixes) seen.insert(sfx.begin(), sfx.end());
      // num_experts says how many experts each expert-parallel rank holds; if that does not fit the
      // optimizer's elements, the optimizer (what was trained) decides, and check_experts names the
      // disagreement.
      bool rebuilt = false;
      for (int per_rank : {-1, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64})
        for (const auto& keep : {seen, std::set<std::string>{}}) {
          if (rebuilt) break;
          auto order = expert_group_order(layers, E, keep, per_rank);
          int64_t total = 0;
          for (const auto& name : order) total += std::max<int64_t>(numel_of(name), 0);
          if (total == N && order.size() >= names.size() &&
              std::equal(names.begin(), names.end(), order.begin())) {
            names = std::move(order);
            rebuilt = true;
          }
        }
      if (!rebuilt) {
        problem(model::Code::UnknownSchema, "expert group " + n(static_cast<int64_t>(g)) +
                                                ": param_slice_mappings and the expert files do not "
                                                "determine its params (" +
                                                n(covered) + " of " + n(N) + " elements accounted for)");
        return {};
      }
      if (global_dp)
        problem(model::Code::ExpertSliceMappings,
                "DeepSpeed " + cat_.ds_version + " recorded the param_slice_mappings of expert group " +
                    n(static_cast<int64_t>(g)) +
                    " with the whole data-parallel size (fixed in 0.14.5, PR #5681): "
                    "DeepSpeed's own loader never reads them, but ds_to_universal.py and "
                    "safe_get_full_fp32_param "
                    "misplace expert weights. The catalog lays the group out from the expert files instead");
    }
    groups.emplace_back();
    for (const auto& name : names) {
      ParamEntry p;
      p.name = name;
      p.shape = entry_shape(name).value_or(std::vector<int64_t>{at.count(name) ? at[name].second : 0});
      p.numel = shape_numel(p.shape);
      groups.back().push_back(std::move(p));
    }
  }
  return groups;
}

void CatalogBuilder::expand_expert_groups() {
  Topology& t = cat_.topology;
  if (!t.moe() || cat_.groups.empty()) return;
  const OptimRankScan* first = nullptr;
  for (const auto& [r, s] : optim_)
    if (s.osd && (!first || r < first->dp_rank)) first = &s;
  const int D = layout_dp_;
  std::vector<GroupLayout> out;
  for (auto& G : cat_.groups) {
    const auto g = static_cast<size_t>(G.file_group);
    const bool moe_flag = first && g < first->group_moe.size() && first->group_moe[g];
    const int parts = static_cast<int>(G.partitions.size());
    bool has_experts = false;
    for (const auto& p : G.params) has_experts = has_experts || expert_of(t, p.name).first >= 0;
    if (!(moe_flag || has_experts) || parts < 1) {
      out.push_back(std::move(G));
      continue;
    }
    int E = D / parts;
    if (first && g < first->group_names.size())
      if (auto named = ep_size_from_name(first->group_names[g])) {
        if (*named * parts != D)
          problem(model::Code::ExpertCountMismatch,
                  "expert group " + n(static_cast<int64_t>(g)) + " is named " + first->group_names[g] +
                      " but is "
                      "partitioned over " +
                      n(parts) + " of " + n(D) + " data-parallel ranks (expected " + n(D / *named) + ")");
        else
          E = *named;
      }
    if (E < 1 || E * parts != D) {
      problem(model::Code::ExpertCountMismatch, "expert group " + n(static_cast<int64_t>(g)) +
                                                    " is partitioned over " + n(parts) +
                                                    " ranks, which does "
                                                    "not divide the data-parallel size " +
                                                    n(D));
      out.push_back(std::move(G));
      continue;
    }
    for (auto& L : t.moe_layers)
      for (const auto& p : G.params)
        if (expert_of(t, p.name).first == L.id) L.ep_size = E;
    t.ep = std::max(t.ep, E);
    for (int e = 0; e < E; ++e) {
      GroupLayout inst = G;
      inst.expert = true;
      inst.ep_rank = e;
      for (auto& p : inst.params) p.name = global_expert_name(t, p.name, e);
      for (size_t k = 0; k < inst.partitions.size(); ++k)
        inst.partitions[k].rank = e + static_cast<int>(k) * E;
      out.push_back(std::move(inst));
    }
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].index = static_cast<int>(i);
  cat_.groups = std::move(out);
  assign_file_coordinates(cat_.files, t);  // expert files' ep ranks need the ep sizes
}

void CatalogBuilder::check_experts() {
  const Topology& t = cat_.topology;
  // Expert files of this model-parallel rank, per MoE layer.
  std::map<int, std::map<int, std::vector<const CheckpointFile*>>> files;  // layer -> expert -> files
  for (const auto& f : cat_.files)
    if (f.role == FileRole::Expert && f.mp_rank == cat_.mp_rank)
      files[std::max(f.layer, 0)][f.expert].push_back(&f);
  // Local experts per MoE layer in the optimizer's expert groups (expert-parallel rank 0's instance).
  std::map<int, std::set<int>> local;
  for (const auto& G : cat_.groups)
    if (G.expert && G.ep_rank == 0)
      for (const auto& p : G.params)
        if (const auto [layer, id] = expert_of(t, p.name); layer >= 0) local[layer].insert(id);
  std::map<std::string, std::string> holder;  // expert param name -> file holding it
  for (const auto& L : t.moe_layers) {
    const auto& mine = files[L.id];
    if (L.num_experts <= 0) {
      problem(model::Code::ExpertCountMismatch, "MoE layer " + n(L.id) + " has " +
                                                    n(static_cast<int64_t>(mine.size())) +
                                                    " expert file(s) but the model "
                                                    "file's num_experts does not list it");
      continue;
    }
    if (L.ep_size > 0 && L.num_experts % L.ep_size != 0)
      problem(model::Code::ExpertCountMismatch, "MoE layer " + n(L.id) + ": num_experts " + n(L.num_experts) +
                                                    " is not a multiple of its expert-parallel "
                                                    "size " +
                                                    n(L.ep_size));
    if (auto it = local.find(L.id);
        it != local.end() && static_cast<int>(it->second.size()) * L.ep_size != L.num_experts)
      problem(model::Code::ExpertCountMismatch, "MoE layer " + n(L.id) + ": the optimizer holds " +
                                                    n(static_cast<int64_t>(it->second.size())) +
                                                    " experts per expert-parallel rank over " + n(L.ep_size) +
                                                    " ranks, but num_experts is " + n(L.num_experts));
    std::vector<std::string> missing, beyond;
    for (int e = 0; e < L.num_experts; ++e)
      if (!mine.count(e))
        missing.push_back(t.legacy_expert_files
                              ? expected_entry_file(cat_, L.prefix + n(e) + ".x")
                              : "layer_" + n(L.id) + "_expert_" + n(e) + "_mp_rank_" +
                                    (cat_.mp_rank < 10 ? "0" : "") + n(cat_.mp_rank) + "_model_states.pt");
    for (const auto& [e, fs] : mine)
      if (e >= L.num_experts) beyond.push_back(fs.front()->path);
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
      problem(model::Code::ExpertFileMissing,
              "MoE layer " + n(L.id) + " has " + n(L.num_experts) + " experts but " +
                  n(static_cast<int64_t>(missing.size())) + " expert file(s) are missing: " + list +
                  ". Their weights are not in the checkpoint; DeepSpeed's load_checkpoint fails on the ranks "
                  "that "
                  "hold them. Copy the files from the training job's storage if they survived there",
              missing.size() == 1 ? missing.front() : std::string());
    }
    if (!beyond.empty()) {
      std::string list;
      for (const auto& b : beyond) list += (list.empty() ? "" : ", ") + b;
      problem(model::Code::ExpertCountMismatch, "MoE layer " + n(L.id) + " has num_experts " +
                                                    n(L.num_experts) +
                                                    " but expert file(s) beyond it: " + list);
    }
    // Each expert's weights in exactly one file, the one its name says.
    for (const auto& [e, fs] : mine) {
      if (fs.size() > 1) {
        std::string list;
        for (const auto* f : fs) list += (list.empty() ? "" : ", ") + f->path;
        problem(model::Code::ExpertFileDuplicated, "expert " + n(e) + " of MoE layer " + n(L.id) +
                                                       " is saved in " + n(static_cast<int64_t>(fs.size())) +
                                                       " files (" + list +
                                                       "); DeepSpeed reads only one of them");
      }
      for (const auto* f : fs) {
        const TorchFile* tf = try_open(*f);
        if (!tf) continue;
        for (const auto& [key, v] : str_items(&tf->root)) {
          const auto [layer, id] = expert_of(t, key);
          if (layer == L.id && id != e)
            problem(model::Code::ExpertFileDuplicated,
                    f->path + " holds '" + key + "', a weight of expert " + n(id) + ", not of expert " + n(e),
                    f->path);
          if (auto [it, fresh] = holder.emplace(key, f->path); !fresh && it->second != f->path)
            problem(model::Code::ExpertFileDuplicated,
                    "'" + key + "' is saved in both " + it->second + " and " + f->path, f->path);
        }
      }
    }
  }
}

}  // namespace ckptdoc::deepspeed
