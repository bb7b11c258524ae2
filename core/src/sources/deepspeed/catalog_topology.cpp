// The job's parallel layout (catalog_topology.h): tensor and pipeline sizes, layer ownership, MoE layers, and
// the coordinates of every file.
#include "sources/deepspeed/catalog_topology.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed::detail {

namespace {

std::string n(int64_t v) {
  return std::to_string(v);
}

// The pipeline layers a stage's model file names: param_shapes (list of OrderedDicts, or one), frozen params
// and buffers.
std::optional<std::set<int>> layers_named(const Value* root) {
  if (!root) return std::nullopt;
  std::set<int> out;
  auto add_keys = [&](const Value* d) {
    for (const auto& [k, v] : str_items(d))
      if (const int l = pipeline_layer_of(k); l >= 0) out.insert(l);
  };
  const Value* shapes = dict_get(root, "param_shapes");
  if (shapes && shapes->is_sequence()) {
    for (const auto& g : shapes->items()) add_keys(&g);
  } else {
    add_keys(shapes);
  }
  add_keys(dict_get(root, "frozen_param_shapes"));
  if (const Value* b = dict_get(root, "buffer_names"); b && b->is_sequence())
    for (const auto& item : b->items())
      if (auto s = opt_str(&item))
        if (const int l = pipeline_layer_of(*s); l >= 0) out.insert(l);
  return out;
}

// The smallest tensor size t (a divisor of mp) under which the mp ranks of each stage name the same layers
// and neighbouring stages name different ones; nullopt when some stage's model file is unreadable or none
// fits.
std::optional<int> tp_from_stage_layers(const std::vector<std::optional<std::set<int>>>& sets) {
  const int mp = static_cast<int>(sets.size());
  for (const auto& s : sets)
    if (!s) return std::nullopt;
  auto at = [&](int i) -> const std::set<int>& { return *sets[static_cast<size_t>(i)]; };
  for (int t = 1; t <= mp; ++t) {
    if (mp % t) continue;
    bool ok = true;
    for (int m = 0; m < mp && ok; ++m) ok = at(m) == at(m / t * t);
    for (int s = 1; s < mp / t && ok; ++s) ok = at(s * t) != at((s - 1) * t);
    if (ok) return t;
  }
  return std::nullopt;
}

void moe_layers(const std::vector<CheckpointFile>& files, const Value* root0, const FileRootFn& file_root,
                Topology& t) {
  // AutoEP keeps its experts inside the ranks' own files, not in layer_*_expert_* files: its num_experts
  // names no expert file (catalog_autoep.cpp handles that layout)
  if (dict_get(root0, "ds_autoep_layers")) return;
  std::vector<int> counts;
  if (const Value* ne = dict_get(root0, "num_experts")) {
    if (auto one = opt_int(ne)) {
      counts.push_back(static_cast<int>(*one));
    } else if (ne->is_sequence()) {
      for (const auto& v : ne->items()) counts.push_back(static_cast<int>(opt_int(&v).value_or(0)));
    }
  }
  std::map<int, const CheckpointFile*> first_file;  // MoE layer id -> one of its expert files
  for (const auto& f : files) {
    if (f.role != FileRole::Expert) continue;
    const int id = std::max(f.layer, 0);  // legacy files carry no layer id: one MoE layer
    if (f.layer < 0) t.legacy_expert_files = true;
    if (!first_file.count(id)) first_file[id] = &f;
  }
  const int layers =
      std::max(static_cast<int>(counts.size()), first_file.empty() ? 0 : first_file.rbegin()->first + 1);
  for (int id = 0; id < layers; ++id) {
    MoeLayer L;
    L.id = id;
    L.num_experts = id < static_cast<int>(counts.size()) ? counts[static_cast<size_t>(id)] : 0;
    if (auto it = first_file.find(id); it != first_file.end()) {
      for (const auto& [k, v] : str_items(file_root(*it->second))) {
        const auto at = k.find(kExpertMarker);
        if (at == std::string::npos) continue;
        L.prefix = k.substr(0, at) + kExpertMarker;
        break;
      }
    }
    t.moe_layers.push_back(std::move(L));
  }
}

}  // namespace

int pipeline_layer_of(const std::string& name) {
  const auto dot = name.find('.');
  if (dot == 0 || dot == std::string::npos || dot > 9) return -1;
  int v = -1;
  auto [p, ec] = std::from_chars(name.data(), name.data() + dot, v);
  return (ec == std::errc() && p == name.data() + dot) ? v : -1;
}

std::pair<int, int> expert_of(const Topology& t, const std::string& name) {
  for (const auto& L : t.moe_layers) {
    if (L.prefix.empty() || name.compare(0, L.prefix.size(), L.prefix) != 0) continue;
    const auto dot = name.find('.', L.prefix.size());
    int id = -1;
    const char* b = name.data() + L.prefix.size();
    const char* e = dot == std::string::npos ? name.data() + name.size() : name.data() + dot;
    auto [p, ec] = std::from_chars(b, e, id);
    if (ec == std::errc() && p == e) return {L.id, id};
  }
  return {-1, -1};
}

std::string global_expert_name(const Topology& t, const std::string& local_name, int ep_rank) {
  const auto [layer, local] = expert_of(t, local_name);
  if (layer < 0) return local_name;
  const MoeLayer& L = t.moe_layers[static_cast<size_t>(layer)];
  const int per_rank = L.ep_size > 0 && L.num_experts > 0 ? L.num_experts / L.ep_size : 0;
  const auto dot = local_name.find('.', L.prefix.size());
  return L.prefix + std::to_string(ep_rank * per_rank + local) +
         (dot == std::string::npos ? std::string() : local_name.substr(dot));
}

std::string local_expert_name(const Topology& t, const std::string& global_name, int ep_rank) {
  const auto [layer, id] = expert_of(t, global_name);
  if (layer < 0) return global_name;
  const MoeLayer& L = t.moe_layers[static_cast<size_t>(layer)];
  const int per_rank = L.ep_size > 0 && L.num_experts > 0 ? L.num_experts / L.ep_size : 0;
  const auto dot = global_name.find('.', L.prefix.size());
  return L.prefix + std::to_string(id - ep_rank * per_rank) +
         (dot == std::string::npos ? std::string() : global_name.substr(dot));
}

Topology derive_topology(const std::vector<CheckpointFile>& files, const ModelRootFn& model_root,
                         const FileRootFn& file_root, std::vector<Problem>& problems) {
  Topology t;
  int max_mp = -1;
  bool any_layer = false, named = false;
  int max_layer_tp = 0;
  for (const auto& f : files) {
    if (f.role == FileRole::Model || f.role == FileRole::Optim || f.role == FileRole::Expert ||
        f.role == FileRole::ExpertOptim)
      max_mp = std::max(max_mp, f.mp_rank);
    if (f.role == FileRole::Layer) {
      any_layer = true;
      named = named || f.tp >= 0;
      max_layer_tp = std::max(max_layer_tp, std::max(f.tp, 0));
    }
  }
  const Value* root0 = model_root(0);
  const auto declared = opt_int(dict_get(root0, "mp_world_size"));
  t.mp_world_size = declared && *declared > 0 && *declared < (1 << 20) ? static_cast<int>(*declared)
                                                                       : std::max(max_mp + 1, 1);
  // Every model-parallel rank is opened and compared with the others: a damaged or hostile mp_world_size far
  // beyond the files present must not make that work unbounded.
  const int plausible = static_cast<int>(std::min<size_t>(files.size(), size_t{1} << 16)) * 2 + 16;
  if (t.mp_world_size > plausible && t.mp_world_size > max_mp + 1) {
    problems.push_back({model::Code::TopologyMismatch,
                        "the model file says mp_world_size " + n(t.mp_world_size) +
                            " but the tag folder holds files of " + n(max_mp + 1) +
                            " model-parallel rank(s) only; using " + n(std::max(max_mp + 1, 1)),
                        {},
                        {},
                        {}});
    t.mp_world_size = std::max(max_mp + 1, 1);
  }
  const Value* module0 = root0 ? root0->get("module") : nullptr;
  t.pipeline = any_layer || (root0 && module0 && module0->is(Value::Kind::None));
  t.layer_files_named_by_tp = named;
  const int mp = t.mp_world_size;
  if (t.pipeline) {
    std::vector<std::optional<std::set<int>>> sets;
    sets.reserve(static_cast<size_t>(mp));
    for (int m = 0; m < mp; ++m) sets.push_back(layers_named(model_root(m)));
    const int by_names = named ? max_layer_tp + 1 : 1;
    const auto by_layers = tp_from_stage_layers(sets);
    t.tp = by_names;
    if (by_layers && *by_layers != by_names) {
      problems.push_back(
          {model::Code::TopologyMismatch,
           "the pipeline layer files name " + n(by_names) + " tensor-parallel rank(s), but the " + n(mp) +
               " model-parallel ranks' params form stages of " + n(*by_layers) +
               " ranks each; the catalog follows the params (layer files of some tensor ranks are "
               "probably missing)",
           {},
           {},
           {}});
      t.tp = *by_layers;
    } else if (mp % by_names != 0) {
      problems.push_back({model::Code::TopologyMismatch, "mp_world_size " + n(mp) +
                                                             " is not a multiple of the " + n(by_names) +
                                                             " tensor-parallel ranks the layer files name"});
      t.tp = 1;
    }
    t.pp = mp / t.tp;
    for (int m = 0; m < mp; ++m)
      if (const auto& s = sets[static_cast<size_t>(m)])
        for (int l : *s) t.layer_stage.emplace(l, t.stage_of(m));
  } else {
    t.tp = mp;
    t.pp = 1;
  }
  // DeepSpeed 0.19.5+ records the sizes it ran with; files that form another layout were mixed or lost.
  if (const Value* dims = dict_get(root0, "checkpoint_parallel_dimensions")) {
    const auto pp = opt_int(dict_get(dims, "pp_degree")), tp = opt_int(dict_get(dims, "tp_degree"));
    // ALST's Ulysses mpu (parallel_state_sp) answers the model-parallel size with the sequence-parallel size:
    // tp_degree is then the SP size while mp_world_size stays 1, and every rank holds the whole model. A lost
    // tensor rank cannot look like this: tensor-parallel jobs record mp_world_size = tp x pp.
    if (pp && tp && *tp > 1 && *tp < (1 << 20) && *pp == t.pp && t.tp == 1 && declared && *declared == 1 &&
        !t.pipeline) {
      const int64_t sp = *tp;
      const auto dp = opt_int(dict_get(root0, "dp_world_size"));
      std::string ranks;
      if (dp && *dp > 0) {
        ranks = "; ZeRO partitioned over its dp_world_size " + n(*dp) +
                " ranks (sequence-parallel x data-parallel";
        ranks += *dp % sp == 0 ? ": " + n(sp) + " x " + n(*dp / sp) + ")" : ")";
      }
      problems
          .emplace_back(model::Code::SequenceParallel,
                        "a Ulysses sequence-parallel job of " + n(sp) +
                            " ranks per sequence group: DeepSpeed records that size as checkpoint_parallel_"
                            "dimensions tensor " +
                            n(sp) +
                            " with mp_world_size 1, but its ranks hold whole replicas of the model (files "
                            "of mp rank 00 only), not tensor slices" +
                            ranks)
          .details = {{"sequence_parallel_size", n(sp)}};
    } else if (pp && tp && (*pp != t.pp || *tp != t.tp))
      problems.push_back({model::Code::TopologyMismatch,
                          "the model file records checkpoint_parallel_dimensions pipeline " + n(*pp) +
                              " x tensor " + n(*tp) + ", but the files form pipeline " + n(t.pp) +
                              " x tensor " + n(t.tp) + "; the catalog follows the files",
                          {},
                          {},
                          {}});
  }
  moe_layers(files, root0, file_root, t);
  return t;
}

void assign_file_coordinates(std::vector<CheckpointFile>& files, const Topology& t) {
  for (auto& f : files) {
    switch (f.role) {
      case FileRole::Layer: {
        const auto it = t.layer_stage.find(f.layer);
        if (it == t.layer_stage.end()) break;  // a stateless-parameter layer between stages: owner unknown
        f.pp = it->second;
        f.mp_rank = f.pp * t.tp + std::max(f.tp, 0);
        if (f.tp < 0) f.tp = 0;
        break;
      }
      case FileRole::Model:
      case FileRole::Optim:
      case FileRole::ExpertOptim:
      case FileRole::Expert:
        if (f.mp_rank >= 0) {
          f.pp = t.stage_of(f.mp_rank);
          f.tp = t.tp_of(f.mp_rank);
        }
        if (f.role == FileRole::Expert && f.expert >= 0) {
          const int id = std::max(f.layer, 0);
          if (id < static_cast<int>(t.moe_layers.size())) {
            const MoeLayer& L = t.moe_layers[static_cast<size_t>(id)];
            const int per_rank = L.ep_size > 0 && L.num_experts >= L.ep_size ? L.num_experts / L.ep_size : 0;
            if (per_rank > 0) f.ep = f.expert / per_rank;
          }
        }
        break;
      case FileRole::Other:
        break;
    }
  }
}

}  // namespace ckptdoc::deepspeed::detail
