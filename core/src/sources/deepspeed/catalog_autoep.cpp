// Catalog building: DeepSpeed's AutoEP layouts (0.19.3+, read against 0.19.8's stage3.py, engine.py and
// checkpoint/autoep_*.py). AutoEP keeps num_experts / ep of each MoE layer's experts on every rank under the
// same param names (fused tensors whose first dimension is the local experts), records each rank's expert
// placement in its model file (ds_autoep_layers) and, under ZeRO-3, partitions that expert sub-group over the
// expert-data-parallel group only (ds_zero_partition_groups in the optimizer files: per sub-group its
// partition count, this rank's partition rank and the group's global ranks). A dense sub-group is laid out
// over dp as usual; the expert sub-group once per expert-parallel rank, over that rank's expert-data-parallel
// group, each ZeRO-3 param sliced in ceil(numel / count) pieces as a dense one is over dp. What the files do
// not pin down exactly (another ZeRO stage, a placement that repeats an expert, a dense sub-group not over
// dp, metadata that disagrees between ranks) is refused with one layout-unsupported problem naming why.
#include <algorithm>
#include <map>
#include <set>

#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

std::string expert_list_text(const std::vector<int>& experts) {
  std::vector<int> e = experts;
  std::sort(e.begin(), e.end());
  std::string s;
  for (size_t i = 0; i < e.size();) {
    size_t j = i;
    while (j + 1 < e.size() && e[j + 1] == e[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(e[i]) + (j > i ? "-" + std::to_string(e[j]) : "");
    i = j + 1;
  }
  return (e.size() == 1 ? "expert " : "experts ") + s;
}

namespace {

std::string n(int64_t x) {
  return std::to_string(x);
}

// One rank's ds_zero_partition_groups entry for one sub-group.
struct PartitionGroup {
  int64_t count = -1, rank = -1;
  std::vector<int64_t> ranks;
  std::set<std::string> families, names;
};

std::vector<PartitionGroup> partition_groups_of(const Value* osd) {
  std::vector<PartitionGroup> out;
  const Value* pg = dict_get(osd, "ds_zero_partition_groups");
  if (!pg || !pg->is_sequence()) return out;
  for (const auto& g : pg->items()) {
    PartitionGroup p;
    p.count = opt_int(dict_get(&g, "partition_count")).value_or(-1);
    p.rank = opt_int(dict_get(&g, "partition_rank")).value_or(-1);
    if (const Value* r = dict_get(&g, "partition_ranks"); r && r->is_sequence())
      for (const auto& v : r->items()) p.ranks.push_back(opt_int(&v).value_or(-1));
    for (const char* key : {"families", "group_names"})
      if (const Value* f = dict_get(&g, key); f && f->is_sequence())
        for (const auto& v : f->items())
          (key[0] == 'f' ? p.families : p.names).insert(opt_str(&v).value_or("?"));
    out.push_back(std::move(p));
  }
  return out;
}

// What one rank's ds_autoep_layers says about one MoE layer.
struct RankLayer {
  AutoEpLayer layer;
  int ep_size = 0, ep_rank = -1, edp_rank = -1, edp_size = -1;
  std::string format;
  int64_t format_version = -1;
};

// Reads one rank's ds_autoep_layers; an empty string or the reason it cannot be used.
std::string read_rank_layers(const Value* autoep, std::vector<RankLayer>& out) {
  if (!autoep || !autoep->is_sequence()) return "there is none (no expert placement)";
  for (const auto& e : autoep->items()) {
    RankLayer L;
    L.layer.id = static_cast<int>(opt_int(dict_get(&e, "moe_layer_id")).value_or(-1));
    L.layer.module_path = opt_str(dict_get(&e, "module_path")).value_or("");
    L.layer.expert_prefix = opt_str(dict_get(&e, "expert_key_prefix")).value_or("");
    L.layer.num_experts = static_cast<int>(opt_int(dict_get(&e, "num_experts")).value_or(0));
    L.ep_size = static_cast<int>(opt_int(dict_get(&e, "ep_size")).value_or(0));
    L.ep_rank = static_cast<int>(opt_int(dict_get(&e, "ep_rank")).value_or(-1));
    L.edp_rank = static_cast<int>(opt_int(dict_get(&e, "expert_data_parallel_rank")).value_or(-1));
    L.edp_size = static_cast<int>(opt_int(dict_get(&e, "expert_data_parallel_world_size")).value_or(-1));
    L.format = opt_str(dict_get(&e, "checkpoint_format")).value_or("");
    L.format_version = opt_int(dict_get(&e, "checkpoint_format_version")).value_or(-1);
    const int local = static_cast<int>(opt_int(dict_get(&e, "num_local_experts")).value_or(0));
    if (L.layer.id < 0 || L.layer.expert_prefix.empty() || L.layer.num_experts < 1 || L.ep_size < 1 ||
        L.ep_rank < 0 || L.ep_rank >= L.ep_size)
      return "an entry lacks moe_layer_id, expert_key_prefix, num_experts, ep_size or ep_rank";
    if (L.format != "zero3_partitioned" || L.format_version != 1)
      return "layer " + n(L.layer.id) + " has checkpoint_format '" + L.format + "' version " +
             n(L.format_version) + " (0.19.8 writes zero3_partitioned, version 1)";
    L.layer.experts_of_rank.assign(static_cast<size_t>(L.ep_size), {});
    if (const Value* placement = dict_get(&e, "expert_placement")) {
      if (opt_int(dict_get(placement, "num_experts")).value_or(-1) != L.layer.num_experts ||
          opt_int(dict_get(placement, "ep_size")).value_or(-1) != L.ep_size)
        return "layer " + n(L.layer.id) + ": expert_placement disagrees with num_experts or ep_size";
      const Value* ranks = dict_get(placement, "ranks");
      if (!ranks || !ranks->is_sequence())
        return "layer " + n(L.layer.id) + ": expert_placement has no ranks";
      for (const auto& r : ranks->items()) {
        const int64_t rank = opt_int(dict_get(&r, "rank")).value_or(-1);
        const Value* ex = dict_get(&r, "experts");
        if (rank < 0 || rank >= L.ep_size || !ex || !ex->is_sequence())
          return "layer " + n(L.layer.id) + ": an expert_placement rank entry is malformed";
        for (const auto& x : ex->items())
          L.layer.experts_of_rank[static_cast<size_t>(rank)].push_back(
              static_cast<int>(opt_int(&x).value_or(-1)));
      }
    } else {  // before placement descriptors: contiguous, num_local_experts each
      if (local < 1 || local * L.ep_size != L.layer.num_experts)
        return "layer " + n(L.layer.id) + ": num_local_experts " + n(local) + " x ep_size " + n(L.ep_size) +
               " is not num_experts " + n(L.layer.num_experts);
      for (int r = 0; r < L.ep_size; ++r)
        for (int i = 0; i < local; ++i)
          L.layer.experts_of_rank[static_cast<size_t>(r)].push_back(r * local + i);
    }
    // Each expert on exactly one rank: a rebuild takes every row from one place (DeepSpeed's placements may
    // repeat an expert on several ranks; which copy the whole model holds is then a choice).
    std::vector<int> held(static_cast<size_t>(L.layer.num_experts), 0);
    for (const auto& list : L.layer.experts_of_rank)
      for (int x : list) {
        if (x < 0 || x >= L.layer.num_experts)
          return "layer " + n(L.layer.id) + ": expert_placement names expert " + n(x) + " of " +
                 n(L.layer.num_experts);
        ++held[static_cast<size_t>(x)];
      }
    for (int x = 0; x < L.layer.num_experts; ++x)
      if (held[static_cast<size_t>(x)] != 1)
        return "layer " + n(L.layer.id) + ": expert " + n(x) + " is placed on " +
               n(held[static_cast<size_t>(x)]) +
               " expert-parallel ranks (ckptdoc reads placements that hold each expert once)";
    out.push_back(std::move(L));
  }
  if (out.empty()) return "ds_autoep_layers is empty";
  return {};
}

bool same_layer(const AutoEpLayer& a, const AutoEpLayer& b) {
  return a.id == b.id && a.module_path == b.module_path && a.expert_prefix == b.expert_prefix &&
         a.num_experts == b.num_experts && a.experts_of_rank == b.experts_of_rank;
}

}  // namespace

AutoEpOutcome CatalogBuilder::autoep_layout() {
  std::set<std::pair<size_t, int64_t>> odd;  // (sub-group, partition count) that differ from the layout's dp
  std::string file;
  bool any_groups = false;
  for (const auto& [r, s] : optim_) {
    if (!s.has_partition_groups) continue;
    any_groups = true;
    for (size_t g = 0; g < s.sub_group_partition_count.size(); ++g) {
      if (s.sub_group_partition_count[g] == layout_dp_) continue;
      odd.insert({g, s.sub_group_partition_count[g]});
      if (file.empty()) {
        const CheckpointFile* f = cat_.optim_file(r, 0);
        file = f ? f->path : std::string();
      }
    }
  }
  const Value* autoep = model_ ? dict_get(&model_->root, "ds_autoep_layers") : nullptr;
  int layers = 0;
  int64_t ep = 0, experts = 0;
  if (autoep && autoep->is_sequence()) {
    for (const auto& L : autoep->items()) {
      ++layers;
      ep = std::max(ep, opt_int(dict_get(&L, "ep_size")).value_or(0));
      experts = std::max(experts, opt_int(dict_get(&L, "num_experts")).value_or(0));
    }
  }
  if (odd.empty() && ep <= 1) return AutoEpOutcome::None;  // ep 1: every rank holds every expert

  std::string unread;  // why the layout is not read; empty when it was
  if (!any_groups && cat_.wrapper == OptimizerWrapper::Zero3)
    unread = "the optimizer files hold no ds_zero_partition_groups";
  else
    unread = read_autoep_groups();
  if (unread.empty()) {
    std::string placed;
    for (const auto& L : cat_.autoep->layers) {
      placed += (placed.empty() ? "" : "; ") + L.expert_prefix + ":";
      for (size_t r = 0; r < L.experts_of_rank.size(); ++r)
        placed += (r ? ", " : " ") + expert_list_text(L.experts_of_rank[r]) + " on ep rank " +
                  n(static_cast<int64_t>(r));
    }
    const auto& a = *cat_.autoep;
    Problem p{
        model::Code::AutoepLayout,
        "AutoEP checkpoint (DeepSpeed 0.19.3+): " + n(a.ep_size) +
            " expert-parallel ranks each hold their own "
            "experts under the same param names (" +
            placed +
            "), and ZeRO-3 partitions the expert sub-group "
            "over each expert-parallel rank's expert-data-parallel group of " +
            n(a.edp_size) + (a.edp_size == 1 ? " rank" : " ranks") +
            " (ds_zero_partition_groups), the dense ones over dp " + n(layout_dp_) +
            ". Each expert param is listed once per expert-parallel rank, named with the "
            "experts it holds; an export concatenates them in global expert order, as DeepSpeed's loaded "
            "engine "
            "gathers them. The model files hold no expert weight (DeepSpeed's 16-bit consolidation refuses "
            "AutoEP ZeRO-3), and its zero_to_fp32.py refuses these checkpoints",
        model_ ? cat_.metadata_model_file()->path : std::string(),
        {},
        {}};
    p.not_checked =
        "AutoEP experts: the model files hold no expert weight, so the experts' masters were compared with "
        "nothing";
    cat_.problems.push_back(std::move(p));
    return AutoEpOutcome::Read;
  }
  cat_.groups.clear();
  cat_.autoep.reset();

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
      model::Code::LayoutUnsupported,
      "AutoEP checkpoint (DeepSpeed 0.19.3+): " + why +
          ". ckptdoc reads this layout only as DeepSpeed 0.19's "
          "ZeRO-3 writes it, and here " +
          unread +
          ": no partition was read as a flat group and no master, moment "
          "or weight was checked (one data-parallel size for every group would misread them). DeepSpeed's "
          "load_checkpoint reads it at the same expert placement and its ds_to_universal.py converts it; its "
          "zero_to_fp32.py refuses it",
      file.empty() && model_ ? model_->path : file);
  return AutoEpOutcome::Refused;
}

std::string CatalogBuilder::read_autoep_groups() {
  if (cat_.wrapper != OptimizerWrapper::Zero3)
    return "the optimizer is " + std::string(wrapper_name(cat_.wrapper)) + ", not ZeRO-3's";
  const int dp = layout_dp_;
  if (dp < 1) return "the data-parallel size is unknown";
  // Folded with AutoTP, the expert groups span the tensor ranks and partition_ranks are not dp ranks.
  if (cat_.topology.model_parallel() || (model_ && dict_get(&model_->root, "folding")))
    return "it is folded with tensor parallelism (" + n(cat_.topology.mp_world_size) +
           " model-parallel ranks), which ckptdoc does not lay out";
  // Every rank's files: its partition groups (optimizer file) and its expert placement (model file).
  std::vector<std::vector<PartitionGroup>> pgs(static_cast<size_t>(dp));
  std::vector<std::vector<RankLayer>> rank_layers(static_cast<size_t>(dp));
  std::vector<const Value*> rank_shapes(static_cast<size_t>(dp), nullptr);
  for (int r = 0; r < dp; ++r) {
    const auto it = optim_.find(r);
    if (it == optim_.end() || !it->second.osd)
      return "the optimizer file of dp rank " + n(r) + " is missing or unreadable";
    pgs[static_cast<size_t>(r)] = partition_groups_of(it->second.osd);
    const CheckpointFile* mf = cat_.model_file(-1, r);
    const TorchFile* tf = mf ? try_open(*mf) : nullptr;
    if (!tf) return "the model file of dp rank " + n(r) + " is missing or unreadable";
    if (auto bad =
            read_rank_layers(dict_get(&tf->root, "ds_autoep_layers"), rank_layers[static_cast<size_t>(r)]);
        !bad.empty())
      return "the ds_autoep_layers of dp rank " + n(r) + " cannot be used: " + bad;
    rank_shapes[static_cast<size_t>(r)] = dict_get(&tf->root, "param_shapes");
    if (!rank_shapes[static_cast<size_t>(r)] || !rank_shapes[static_cast<size_t>(r)]->is_sequence())
      return "the model file of dp rank " + n(r) + " has no param_shapes list";
  }
  // The layers and their placement, alike on every rank; each rank in one expert-parallel rank for all
  // layers.
  AutoEp a;
  const auto& L0 = rank_layers[0];
  a.ep_size = L0.front().ep_size;
  a.edp_size = L0.front().edp_size;
  for (const auto& L : L0) a.layers.push_back(L.layer);
  a.ep_rank_of_dp.assign(static_cast<size_t>(dp), -1);
  for (int r = 0; r < dp; ++r) {
    const auto& mine = rank_layers[static_cast<size_t>(r)];
    if (mine.size() != L0.size()) return "dp ranks 0 and " + n(r) + " list different AutoEP layers";
    for (size_t i = 0; i < mine.size(); ++i) {
      const auto& L = mine[i];
      if (!same_layer(L.layer, L0[i].layer) || L.ep_size != a.ep_size || L.edp_size != a.edp_size)
        return "dp ranks 0 and " + n(r) + " record AutoEP layer " + n(L.layer.id) + " differently";
      if (i > 0 && (L.ep_rank != mine[0].ep_rank || L.edp_rank != mine[0].edp_rank))
        return "dp rank " + n(r) + " is in different expert-parallel ranks for different layers";
    }
    a.ep_rank_of_dp[static_cast<size_t>(r)] = mine[0].ep_rank;
  }
  if (a.edp_size < 1 || a.ep_size * a.edp_size != dp)
    return "ep_size " + n(a.ep_size) + " x expert_data_parallel_world_size " + n(a.edp_size) + " is not dp " +
           n(dp);
  // Which layer an expert param belongs to: the params under its expert_key_prefix.
  auto layer_of = [&a](const std::string& name) -> int {
    for (size_t i = 0; i < a.layers.size(); ++i) {
      const std::string& pre = a.layers[i].expert_prefix;
      if (name.size() > pre.size() + 1 && name.compare(0, pre.size(), pre) == 0 && name[pre.size()] == '.' &&
          name.find('.', pre.size() + 1) == std::string::npos)
        return static_cast<int>(i);
    }
    return -1;
  };

  auto groups = param_groups_from_shapes();  // rank 0's param_shapes: the dense sub-groups' params
  const size_t G = groups.size();
  for (int r = 0; r < dp; ++r) {
    if (pgs[static_cast<size_t>(r)].size() != G)
      return "the optimizer file of dp rank " + n(r) + " lists " +
             n(static_cast<int64_t>(pgs[static_cast<size_t>(r)].size())) + " partition groups for " +
             n(static_cast<int64_t>(G)) + " sub-groups";
    if (rank_shapes[static_cast<size_t>(r)]->items().size() != G)
      return "the param_shapes of dp ranks 0 and " + n(r) + " list different numbers of sub-groups";
  }
  std::vector<GroupLayout> out;
  for (size_t g = 0; g < G; ++g) {
    const PartitionGroup& p0 = pgs[0][g];
    for (int r = 1; r < dp; ++r) {
      const PartitionGroup& p = pgs[static_cast<size_t>(r)][g];
      if (p.count != p0.count || p.families != p0.families || p.names != p0.names)
        return "dp ranks 0 and " + n(r) + " record sub-group " + n(static_cast<int64_t>(g)) + " differently";
    }
    const std::string sg = "sub-group " + n(static_cast<int64_t>(g));
    if (p0.families == std::set<std::string>{"replicated"}) {
      for (int r = 0; r < dp; ++r) {
        const PartitionGroup& p = pgs[static_cast<size_t>(r)][g];
        std::vector<int64_t> all(static_cast<size_t>(dp));
        for (int k = 0; k < dp; ++k) all[static_cast<size_t>(k)] = k;
        if (p.count != dp || p.rank != r || p.ranks != all)
          return sg + " (dense) is not partitioned over all " + n(dp) + " ranks in rank order";
      }
      for (const auto& prm : groups[g])
        if (layer_of(prm.name) >= 0) return sg + " (dense) holds the expert param " + prm.name;
      out.push_back(layout_zero3(static_cast<int>(out.size()), std::move(groups[g]), dp));
      out.back().file_group = static_cast<int>(g);
      continue;
    }
    if (p0.families != std::set<std::string>{"autoep_expert"}) {
      std::string why = sg + " holds the families [";
      for (const auto& f : p0.families) why.append(why.back() == '[' ? "" : ", ").append(f);
      return why + "]";
    }
    if (p0.count != a.edp_size)
      return sg + " (experts) is partitioned over " + n(p0.count) + " ranks, not the expert-data-parallel " +
             n(a.edp_size);
    // One instance per expert-parallel rank: the ranks that partition it among them (partition_ranks).
    std::map<int, std::vector<int64_t>> ranks_of_ep;
    for (int r = 0; r < dp; ++r) {
      const PartitionGroup& p = pgs[static_cast<size_t>(r)][g];
      const int e = a.ep_rank_of_dp[static_cast<size_t>(r)];
      if (static_cast<int64_t>(p.ranks.size()) != p.count || p.rank < 0 || p.rank >= p.count ||
          p.ranks[static_cast<size_t>(p.rank)] != r ||
          p.rank != rank_layers[static_cast<size_t>(r)][0].edp_rank)
        return sg + " (experts): dp rank " + n(r) + "'s partition_rank and partition_ranks do not place it";
      auto [it, fresh] = ranks_of_ep.try_emplace(e, p.ranks);
      if (!fresh && it->second != p.ranks)
        return sg + " (experts): the ranks of expert-parallel rank " + n(e) +
               " list different partition_ranks";
    }
    if (static_cast<int>(ranks_of_ep.size()) != a.ep_size)
      return sg + " (experts) is held by " + n(static_cast<int64_t>(ranks_of_ep.size())) + " of " +
             n(a.ep_size) + " expert-parallel ranks";
    std::vector<std::string> names0;
    for (const auto& [e, ranks] : ranks_of_ep) {
      for (int64_t r : ranks)
        if (a.ep_rank_of_dp[static_cast<size_t>(r)] != e)
          return sg + " (experts): dp rank " + n(r) +
                 " partitions the experts of another expert-parallel rank";
      // This expert-parallel rank's own params and shapes: the param_shapes of its first rank's model file.
      const Value* shapes = list_at(rank_shapes[static_cast<size_t>(ranks.front())], g);
      std::vector<ParamEntry> params;
      for (const auto& [name, v] : str_items(shapes)) {
        ParamEntry prm;
        prm.shape = shape_of(v).value_or(std::vector<int64_t>{});
        prm.numel = shape_numel(prm.shape);
        const int li = layer_of(name);
        if (li < 0)
          return std::string(sg)
              .append(" (experts) holds ")
              .append(name)
              .append(", which no AutoEP layer's expert_key_prefix names");
        const auto& local = a.layers[static_cast<size_t>(li)].experts_of_rank[static_cast<size_t>(e)];
        if (prm.shape.empty() || prm.shape[0] != static_cast<int64_t>(local.size()))
          return std::string(sg)
              .append(" (experts): ")
              .append(name)
              .append(" on expert-parallel rank " + n(e) + " is not " +
                      n(static_cast<int64_t>(local.size())) + " experts long");
        prm.name = name + " [" + expert_list_text(local) + " on ep rank " + n(e) + "]";
        a.params[prm.name] = AutoEpParam{name, li, e};
        params.push_back(std::move(prm));
      }
      std::vector<std::string> names;
      names.reserve(params.size());
      for (const auto& prm : params) names.push_back(a.params[prm.name].name);
      if (names0.empty()) names0 = names;
      if (names != names0 || names.empty())
        return sg + " (experts) lists other params on expert-parallel rank " + n(e);
      GroupLayout inst =
          layout_zero3(static_cast<int>(out.size()), std::move(params), static_cast<int>(p0.count));
      inst.file_group = static_cast<int>(g);
      inst.expert = true;
      inst.ep_rank = e;
      for (size_t k = 0; k < inst.partitions.size(); ++k)
        inst.partitions[k].rank = static_cast<int>(ranks[k]);
      out.push_back(std::move(inst));
    }
  }
  // The expert params of every layer, each in an expert sub-group with the same trailing shape on every rank.
  std::map<std::string, std::vector<int64_t>> trailing;
  for (const auto& G2 : out)
    for (const auto& prm : G2.params)
      if (G2.expert) {
        const std::vector<int64_t> t(prm.shape.begin() + 1, prm.shape.end());
        auto [it, fresh] = trailing.try_emplace(a.params[prm.name].name, t);
        if (!fresh && it->second != t)
          return "the expert param " + it->first + " has other shapes on different expert-parallel ranks";
      }
  for (const auto& L : a.layers) {
    bool any = false;
    for (const auto& [name, t] : trailing) any = any || (name.rfind(L.expert_prefix + ".", 0) == 0);
    if (!any)
      return "no sub-group holds the experts of AutoEP layer " + n(L.id) + " (" + L.expert_prefix + ")";
  }
  cat_.groups = std::move(out);
  cat_.autoep = std::move(a);
  return {};
}

}  // namespace ckptdoc::deepspeed
