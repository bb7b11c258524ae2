// FP16_Optimizer (fp16, or bf16 from DeepSpeed 0.18.5, at ZeRO stage 0 with FusedAdam): its state lives in
// the model file's `optimizer` key, one flat fp32 master per param group (`fp32_groups_flat[g]`: the group's
// trainable params concatenated, no padding) and the torch optimizer's moments keyed by group. From 0.18.5
// the model file's param_shapes is None, so nothing names what a flat group holds. The module's params are
// given to the groups in module order (as groups built from model.parameters() are) so that each group's
// lengths add up to its flat length; the match is used only when exactly one assignment fits. Each flat group
// becomes a group with one unpartitioned "rank" 0, like a universal checkpoint's.
#include <map>
#include <numeric>

#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/tensor_slice.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

// Counts (up to 2) the ways to give each module param to one group or to none (frozen), in module order, so
// that every group's params add up to its flat length. Memoised on (param, lengths still to fill).
class LengthMatcher {
 public:
  LengthMatcher(std::vector<int64_t> lengths, std::vector<int64_t> numels)
      : lengths_(std::move(lengths)), numels_(std::move(numels)), suffix_(numels_.size() + 1, 0) {
    for (size_t j = numels_.size(); j-- > 0;) suffix_[j] = suffix_[j + 1] + numels_[j];
  }

  // The group of each module param (-1: not in the optimizer), or nullopt when no assignment or several fit
  // (`ambiguous` says which) or the search grew too large.
  std::optional<std::vector<int>> unique(bool& ambiguous) {
    std::vector<int64_t> left = lengths_;
    const int ways = count(0, left);
    ambiguous = ways > 1 || too_large_;
    if (ways != 1 || too_large_) return std::nullopt;
    std::vector<int> owner;
    for (size_t j = 0; j < numels_.size(); ++j) {
      int pick = -1;
      for (size_t g = 0; g < left.size() && pick < 0; ++g) {
        if (left[g] < numels_[j]) continue;
        left[g] -= numels_[j];
        if (count(j + 1, left) == 1)
          pick = static_cast<int>(g);
        else
          left[g] += numels_[j];
      }
      owner.push_back(pick);
    }
    return owner;
  }

 private:
  int count(size_t j, std::vector<int64_t>& left) {
    const int64_t to_fill = std::accumulate(left.begin(), left.end(), int64_t{0});
    if (to_fill > suffix_[j]) return 0;
    if (j == numels_.size()) return 1;
    auto key = std::make_pair(j, left);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (memo_.size() > kMaxStates) {
      too_large_ = true;
      return 2;
    }
    // A param left out (frozen) only while the params after it can still fill every group.
    int ways = to_fill < suffix_[j] ? count(j + 1, left) : 0;
    for (size_t g = 0; g < left.size() && ways < 2; ++g) {
      if (left[g] < numels_[j]) continue;
      left[g] -= numels_[j];
      ways += count(j + 1, left);
      left[g] += numels_[j];
    }
    ways = std::min(ways, 2);
    memo_.emplace(std::move(key), ways);
    return ways;
  }

  static constexpr size_t kMaxStates = 200000;
  std::vector<int64_t> lengths_, numels_, suffix_;
  std::map<std::pair<size_t, std::vector<int64_t>>, int> memo_;
  bool too_large_ = false;
};

}  // namespace

void CatalogBuilder::build_fused_groups() {
  const Value* opt = model_ ? dict_get(&model_->root, "optimizer") : nullptr;
  const Value* flat = dict_get(opt, "fp32_groups_flat");
  const CheckpointFile* mf = cat_.metadata_model_file();
  const std::string file = mf ? mf->path : std::string();
  if (!flat || !flat->is_sequence()) return;
  std::vector<int64_t> lengths;
  std::string listed;
  for (const auto& t : flat->items()) {
    if (!t.is_tensor() || t.as_tensor().shape.size() != 1) {
      problem(model::Code::UnknownSchema,
              file + ": optimizer.fp32_groups_flat holds a " + t.type_name() +
                  " where a flat fp32 master of a param group was expected",
              file);
      return;
    }
    lengths.push_back(t.as_tensor().shape[0]);
    listed += (listed.empty() ? "" : ", ") + std::to_string(lengths.back());
  }

  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  module_float_params(names, shapes);
  std::vector<int64_t> numels;
  numels.reserve(shapes.size());
  for (const auto& s : shapes)
    numels.push_back(
        std::accumulate(s.begin(), s.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; }));
  bool ambiguous = false;
  const auto owner = LengthMatcher(lengths, numels).unique(ambiguous);
  if (!owner) {
    problem(
        model::Code::ParamMappingUnknown,
        file + ": the flat fp32 masters of FP16_Optimizer (groups of " + listed +
            " elements) carry no names, and " +
            (ambiguous ? "several assignments of the module's params add up to those lengths"
                       : "no assignment of the module's params adds up to those lengths") +
            " (each group's params taken in the model's order): the masters are not compared with the 16-bit "
            "weights",
        file);
    return;
  }
  for (size_t g = 0; g < lengths.size(); ++g) {
    GroupLayout G;
    G.index = G.file_group = static_cast<int>(cat_.groups.size());
    G.numel = G.padded_numel = G.partition_numel = lengths[g];
    RankPartition rp;
    rp.rank = 0;
    rp.saved_numel = rp.real_numel = lengths[g];
    int64_t offset = 0;
    for (size_t j = 0; j < owner->size(); ++j) {
      if ((*owner)[j] != static_cast<int>(g)) continue;
      ParamEntry p;
      p.name = names[j];
      p.shape = shapes[j];
      p.numel = numels[j];
      p.offset = offset;
      rp.fragments.push_back(Fragment{static_cast<int>(G.params.size()), 0, offset, p.numel});
      offset += p.numel;
      G.params.push_back(std::move(p));
    }
    G.partitions.push_back(std::move(rp));
    cat_.groups.push_back(std::move(G));
  }
}

}  // namespace ckptdoc::deepspeed
