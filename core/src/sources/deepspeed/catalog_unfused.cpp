// FP16_UnfusedOptimizer (bf16 or fp16 at ZeRO stage 0 with a torch optimizer): its state lives in the model
// file's `optimizer` key, one fp32 master per param in `fp32_groups[g][i]` and the torch optimizer's state
// keyed by the param's position in that order. Nothing names the masters, so they are matched to the module's
// params by shape, each group's params taken in the model's order (as groups built from model.parameters()
// are); the match is used only when exactly one assignment fits. Each param becomes its own flat group with
// one unpartitioned "rank" 0, like a universal checkpoint's.
#include <algorithm>
#include <map>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/tensor_slice.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

using Shape = std::vector<int64_t>;

// Counts (up to 2) the ways to give every master a module param of its shape, each group's masters taking
// params in module order; module params no group takes are frozen. Memoised on (param, position per group).
class ShapeMatcher {
 public:
  ShapeMatcher(const std::vector<std::vector<Shape>>& groups, const std::vector<Shape>& params)
      : groups_(groups), params_(params) {}

  // The group of each module param (-1: not in the optimizer), or nullopt when no assignment or several fit
  // (`ambiguous` says which) or the search grew too large.
  std::optional<std::vector<int>> unique(bool& ambiguous) {
    std::vector<size_t> pos(groups_.size(), 0);
    const int ways = count(0, pos);
    ambiguous = ways > 1 || too_large_;
    if (ways != 1 || too_large_) return std::nullopt;
    std::vector<int> owner;
    for (size_t j = 0; j < params_.size(); ++j) {
      int pick = -1;
      for (size_t g = 0; g < groups_.size() && pick < 0; ++g) {
        if (!fits(g, j, pos)) continue;
        ++pos[g];
        if (count(j + 1, pos) == 1)
          pick = static_cast<int>(g);
        else
          --pos[g];
      }
      owner.push_back(pick);
    }
    return owner;
  }

 private:
  bool fits(size_t g, size_t j, const std::vector<size_t>& pos) const {
    return pos[g] < groups_[g].size() && groups_[g][pos[g]] == params_[j];
  }

  int count(size_t j, std::vector<size_t>& pos) {
    size_t left = 0;
    for (size_t g = 0; g < groups_.size(); ++g) left += groups_[g].size() - pos[g];
    if (left > params_.size() - j) return 0;
    if (j == params_.size()) return 1;
    auto key = std::make_pair(j, pos);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (memo_.size() > kMaxStates) {
      too_large_ = true;
      return 2;
    }
    int ways = count(j + 1, pos);  // a param the optimizer does not hold
    for (size_t g = 0; g < groups_.size() && ways < 2; ++g) {
      if (!fits(g, j, pos)) continue;
      ++pos[g];
      ways += count(j + 1, pos);
      --pos[g];
    }
    ways = std::min(ways, 2);
    memo_.emplace(std::move(key), ways);
    return ways;
  }

  static constexpr size_t kMaxStates = 200000;
  const std::vector<std::vector<Shape>>& groups_;
  const std::vector<Shape>& params_;
  std::map<std::pair<size_t, std::vector<size_t>>, int> memo_;
  bool too_large_ = false;
};

}  // namespace

void CatalogBuilder::module_float_params(std::vector<std::string>& names,
                                         std::vector<std::vector<int64_t>>& shapes) const {
  std::set<std::string> buffers(cat_.buffer_names.begin(), cat_.buffer_names.end());
  for (const auto& [k, v] : str_items(dict_get(&model_->root, "module"))) {
    if (buffers.count(k) || !v->is_tensor() || !is_floating(v->as_tensor().dtype)) continue;
    names.push_back(k);
    shapes.push_back(v->as_tensor().shape);
  }
}

void CatalogBuilder::build_unfused_groups() {
  const Value* opt = model_ ? dict_get(&model_->root, "optimizer") : nullptr;
  const Value* fp32 = dict_get(opt, "fp32_groups");
  const CheckpointFile* mf = cat_.metadata_model_file();
  const std::string file = mf ? mf->path : std::string();
  if (!fp32 || !fp32->is_sequence()) return;
  std::vector<std::vector<Shape>> masters;
  for (const auto& g : fp32->items()) {
    masters.emplace_back();
    if (!g.is_sequence()) {
      problem(model::Code::UnknownSchema,
              file + ": optimizer.fp32_groups holds a " + g.type_name() +
                  " where a list of fp32 masters was expected",
              file);
      return;
    }
    for (const auto& t : g.items()) {
      if (!t.is_tensor()) {
        problem(model::Code::UnknownSchema,
                file + ": optimizer.fp32_groups holds a " + t.type_name() +
                    " where an fp32 master tensor was expected",
                file);
        return;
      }
      masters.back().push_back(t.as_tensor().shape);
    }
  }
  // The torch optimizer numbers the params group by group in the same order: its state[k] is master k.
  const Value* pgs = dict_get(dict_get(opt, "optimizer_state_dict"), "param_groups");
  int64_t next = 0;
  bool ids_agree = pgs && pgs->is_sequence() && pgs->items().size() == masters.size();
  for (size_t g = 0; ids_agree && g < masters.size(); ++g) {
    const Value* ids = dict_get(&pgs->items()[g], "params");
    ids_agree = ids && ids->is_sequence() && ids->items().size() == masters[g].size();
    for (size_t i = 0; ids_agree && i < masters[g].size(); ++i)
      ids_agree = opt_int(&ids->items()[i]) == next++;
  }
  if (!ids_agree) {
    problem(
        model::Code::LayoutMismatch,
        file +
            ": optimizer.optimizer_state_dict.param_groups do not list the params 0, 1, 2, ... group by "
            "group as optimizer.fp32_groups holds them: the moments cannot be matched to the fp32 masters",
        file);
    return;
  }

  std::vector<std::string> names;
  std::vector<Shape> shapes;
  module_float_params(names, shapes);
  bool ambiguous = false;
  const auto owner = ShapeMatcher(masters, shapes).unique(ambiguous);
  if (!owner) {
    std::string listed;
    for (size_t g = 0; g < masters.size(); ++g) {
      listed += (g ? "; group " : "group ") + std::to_string(g) + ":";
      for (const auto& s : masters[g]) listed += " " + shape_text(s);
    }
    problem(model::Code::ParamMappingUnknown,
            file + ": the fp32 masters of FP16_UnfusedOptimizer carry no names, and " +
                (ambiguous ? "several assignments of the module's params fit their shapes"
                           : "no assignment of the module's params fits their shapes") +
                " (each group's params taken in the model's order; " + listed +
                "): the masters are not compared with the 16-bit weights",
            file);
    return;
  }
  // Masters in file order: group by group, each group's params in module order.
  std::vector<std::vector<size_t>> by_group(masters.size());
  for (size_t j = 0; j < owner->size(); ++j)
    if ((*owner)[j] >= 0) by_group[static_cast<size_t>((*owner)[j])].push_back(j);
  for (const auto& members : by_group)
    for (size_t j : members) {
      const int k = static_cast<int>(cat_.groups.size());
      GroupLayout G;
      G.index = G.file_group = k;
      ParamEntry p;
      p.name = names[j];
      p.shape = shapes[j];
      p.numel = 1;
      for (auto d : p.shape) p.numel *= d;
      G.numel = G.padded_numel = G.partition_numel = p.numel;
      RankPartition rp;
      rp.rank = 0;
      rp.saved_numel = rp.real_numel = p.numel;
      rp.fragments.push_back(Fragment{0, 0, 0, p.numel});
      G.partitions.push_back(std::move(rp));
      G.params.push_back(std::move(p));
      cat_.groups.push_back(std::move(G));
    }
}

std::optional<Tensor> Checkpoint::unfused_master(int group, int dp_rank) const {
  if (dp_rank != 0) return std::nullopt;  // one unpartitioned copy, in the model file
  const Value* lists = dict_get(&optimizer_state(0), "fp32_groups");
  int k = 0;  // the flat group's file position: masters counted group by group
  if (group >= 0 && static_cast<size_t>(group) < catalog_.groups.size())
    k = catalog_.groups[static_cast<size_t>(group)].file_group;
  for (size_t g = 0; lists && lists->is_sequence() && g < lists->items().size(); ++g) {
    const Value& list = lists->items()[g];
    const int n = list.is_sequence() ? static_cast<int>(list.items().size()) : 0;
    if (k < n) {
      const Value& t = list.items()[static_cast<size_t>(k)];
      if (t.is_tensor()) return detail::flat_view(t.as_tensor());
      break;
    }
    k -= n;
  }
  throw Error(ErrorKind::Corrupt, state_file_path(0), "key 'optimizer.fp32_groups'",
              "the fp32 master of param group " + std::to_string(group) + " is missing");
}

}  // namespace ckptdoc::deepspeed
