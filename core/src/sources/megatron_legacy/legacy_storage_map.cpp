// A legacy Megatron save's storage map (legacy_storage_map.h).
#include "legacy_storage_map.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include "ckptdoc/error.h"
#include "legacy_mains.h"
#include "legacy_pipeline.h"
#include "legacy_weights.h"

namespace ckptdoc::megatron_legacy {
namespace {

using sources::ChunkPlace;
using sources::StorageFile;
using sources::StorageMap;
using sources::StoredItem;
using sources::StoredKey;

// A rank's model tensor in the global model: its name and its piece's box.
struct Box {
  std::string name;
  std::vector<int64_t> offsets, sizes, shape;  // shape: the global one
  size_t stage = 0, index = 0;                 // its stage and place in that stage's saved order
};

// Keys sort by what they are, then by stage and saved order: the model, then the mains, then each moment.
enum Category { kModel, kMain, kExpAvg, kExpAvgSq, kOwnRank };
const char* const kPrefix[] = {"", "optimizer.state.fp32_param.", "optimizer.state.exp_avg.",
                               "optimizer.state.exp_avg_sq."};

// One tensor record of one file, with the global key it would take and its rank's own key.
struct Entry {
  size_t file = 0, rank = 0;
  std::string global, local;  // global empty: the rank's own key only
  std::string dtype;
  std::vector<int64_t> offsets, sizes, shape, local_shape;
  uint64_t offset = 0, length = 0;
  std::tuple<int, size_t, size_t, size_t> order;  // category, stage (or rank), index, sequence
};

uint64_t first_byte(const Tensor& t) {
  return t.storage ? t.storage->file_offset + static_cast<uint64_t>(t.storage_offset) * element_size(t.dtype)
                   : 0;
}

// The bytes a tensor's elements span (its nbytes when contiguous).
uint64_t span_bytes(const Tensor& t) {
  if (t.is_contiguous() || t.numel() == 0) return t.nbytes();
  int64_t last = 0;
  for (size_t d = 0; d < t.shape.size(); ++d) last += (t.shape[d] - 1) * t.strides[d];
  return static_cast<uint64_t>(last + 1) * element_size(t.dtype);
}

// Each rank's model tensors placed in the global model; empty when the save's layout is not one ckptdoc
// merges (the reasons select_weights names: unreadable ranks, expert or virtual pipeline saves, --swiglu at
// tensor-parallel size > 1, folders that do not fill tp x pp, stages that do not join).
std::vector<std::vector<std::optional<Box>>> place_model(const LegacyFolder& folder,
                                                         const std::vector<RankContent>& ranks,
                                                         std::vector<size_t>& tp_of_stage) {
  std::vector<std::vector<std::optional<Box>>> boxes(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) boxes[r].resize(ranks[r].model.size());
  if (ranks.empty()) return boxes;
  for (const auto& r : ranks)
    if (!r.readable() || r.model_key != "model") return boxes;
  const auto& first = ranks.front();
  const auto tp = static_cast<size_t>(std::max(first.tp_size, 1));
  const auto pp = static_cast<size_t>(std::max(first.pp_size, 1));
  if (first.ep_size > 1 || (first.swiglu && tp > 1) || ranks.size() != tp * pp) return boxes;
  std::vector<std::vector<size_t>> grid(pp, std::vector<size_t>(tp, ranks.size()));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& f = folder.ranks[r];
    if (f.tp < 0 || f.pp < 0 || static_cast<size_t>(f.tp) >= tp || static_cast<size_t>(f.pp) >= pp ||
        grid[static_cast<size_t>(f.pp)][static_cast<size_t>(f.tp)] != ranks.size())
      return boxes;
    grid[static_cast<size_t>(f.pp)][static_cast<size_t>(f.tp)] = r;
  }
  // The global names: each stage's layers renumbered as export does (tensor rank 0's names stand for its
  // stage; a rank with other names is checked below).
  std::vector<Stage> stages;
  stages.reserve(pp);
  for (const auto& at : grid) stages.push_back({folder.ranks[at.front()].shown, ranks[at.front()].model});
  JoinedStages joined;
  try {
    joined = join_stages(folder.dir, std::move(stages), first.num_layers);
  } catch (const Error&) {
    return boxes;  // the stages do not join: every tensor keeps its rank's key
  }
  std::vector<std::vector<std::optional<Box>>> placed(boxes);
  size_t at_joined = 0;
  for (size_t s = 0; s < pp; ++s) {
    const auto& lead = ranks[grid[s].front()].model;
    for (size_t i = 0; i < lead.size(); ++i, ++at_joined) {
      const std::string& local = lead[i].name;
      const int axis = tp > 1 ? tp_axis(local) : -1;
      std::vector<int64_t> shape = lead[i].tensor.shape;
      bool fits = true;
      int64_t along = 0;
      for (size_t t = 0; t < tp && fits; ++t) {
        const auto& m = ranks[grid[s][t]].model;
        fits = i < m.size() && m[i].name == local && m[i].tensor.dtype == lead[i].tensor.dtype &&
               m[i].tensor.shape.size() == shape.size();
        for (size_t d = 0; fits && d < shape.size(); ++d)
          fits = static_cast<int>(d) == axis || m[i].tensor.shape[d] == shape[d];
        if (fits && axis >= 0 && static_cast<size_t>(axis) < shape.size())
          along += m[i].tensor.shape[static_cast<size_t>(axis)];
      }
      if (!fits) continue;
      const bool split = axis >= 0 && static_cast<size_t>(axis) < shape.size();
      if (split) shape[static_cast<size_t>(axis)] = along;
      int64_t offset = 0;
      for (size_t t = 0; t < tp; ++t) {
        const auto& piece = ranks[grid[s][t]].model[i].tensor.shape;
        Box b{joined.tensors[at_joined].name, std::vector<int64_t>(shape.size(), 0), piece, shape, s, i};
        if (split) {
          b.offsets[static_cast<size_t>(axis)] = offset;
          offset += piece[static_cast<size_t>(axis)];
        }
        placed[grid[s][t]][i] = std::move(b);
      }
    }
  }
  tp_of_stage.assign(pp, tp);
  return placed;
}

class Builder {
 public:
  Builder(const LegacyFolder& folder, const std::vector<RankContent>& ranks) : folder_(folder) {
    boxes_ = place_model(folder, ranks, tp_of_stage_);
  }

  size_t add_file(const std::string& shown, const std::string& path) {
    StorageFile f;
    f.name = shown;
    std::error_code ec;
    f.size = std::filesystem::file_size(path, ec);
    f.present = !ec;
    if (ec) f.size = 0;
    map_.files.push_back(std::move(f));
    return map_.files.size() - 1;
  }

  // A record of rank `r`'s tensor `t` (elements [first, first + count) of it when count >= 0: a piece of a
  // 1-D coalesced buffer), placed as model tensor `model` under `category` when that is placed, else under
  // `local` (its rank's own key).
  void add(size_t file, size_t r, const std::string& local, const Tensor& t, std::optional<size_t> model,
           Category category, int64_t first = 0, int64_t count = -1) {
    Entry e;
    e.file = file;
    e.rank = r;
    e.local = folder_.ranks[r].name + "/" + local;
    e.dtype = std::string(dtype_name(t.dtype));
    const uint64_t esize = element_size(t.dtype);
    e.offset = first_byte(t) + static_cast<uint64_t>(first) * esize;
    e.length = count >= 0 ? static_cast<uint64_t>(count) * esize : span_bytes(t);
    e.local_shape = count >= 0 ? std::vector<int64_t>{count} : t.shape;
    const Box* box = model && *model < boxes_[r].size() && boxes_[r][*model] ? &*boxes_[r][*model] : nullptr;
    int64_t piece = 1;
    if (box)
      for (const int64_t n : box->sizes) piece *= n;
    // A main or moment takes its param's box only when it holds that piece's elements.
    if (box && (count >= 0 ? count == piece : t.shape == box->sizes)) {
      e.global = kPrefix[category] + box->name;
      e.offsets = box->offsets;
      e.sizes = box->sizes;
      e.shape = box->shape;
      e.order = {category, box->stage, box->index, 0};
    } else {
      e.order = {kOwnRank, r, 0, seq_};
    }
    ++seq_;
    entries_.push_back(std::move(e));
  }

  StorageMap finish(const std::string& dir) {
    // A global key needs one chunk from every tensor rank of its stage, all of one dtype; else each of its
    // records keeps its rank's key (a partial key would read as a gap in the save).
    std::map<std::string, std::vector<Entry*>> by_key;
    for (auto& e : entries_)
      if (!e.global.empty()) by_key[e.global].push_back(&e);
    for (auto& [key, es] : by_key) {
      const size_t want = tp_of_stage_.empty() ? 0 : tp_of_stage_[std::get<1>(es.front()->order)];
      bool whole = es.size() == want;
      for (const auto* e : es) whole = whole && e->dtype == es.front()->dtype;
      if (whole) continue;
      for (auto* e : es) {
        e->global.clear();
        e->order = {kOwnRank, e->rank, 0, std::get<3>(e->order)};
      }
    }
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const Entry& a, const Entry& b) { return a.order < b.order; });
    std::map<std::string, size_t> key_at;
    for (const auto& e : entries_) {
      const bool global = !e.global.empty();
      const std::string& key = global ? e.global : e.local;
      const auto offsets = global ? e.offsets : std::vector<int64_t>(e.local_shape.size(), 0);
      const auto sizes = global ? e.sizes : e.local_shape;
      auto [it, fresh] = key_at.emplace(key, map_.keys.size());
      if (fresh) map_.keys.push_back({key, true, e.dtype, global ? e.shape : e.local_shape, {}});
      auto& file = map_.files[e.file];
      map_.keys[it->second].chunks.push_back({file.name, offsets, sizes, e.offset, e.length});
      file.items.push_back({key, offsets, sizes, e.offset, e.length, true});
      file.extent = std::max(file.extent, e.offset + e.length);
    }
    for (auto& k : map_.keys)
      std::stable_sort(k.chunks.begin(), k.chunks.end(),
                       [](const ChunkPlace& a, const ChunkPlace& b) { return a.offsets < b.offsets; });
    for (auto& f : map_.files)
      std::stable_sort(f.items.begin(), f.items.end(),
                       [](const StoredItem& a, const StoredItem& b) { return a.offset < b.offset; });
    std::stable_sort(map_.files.begin(), map_.files.end(),
                     [](const StorageFile& a, const StorageFile& b) { return a.name < b.name; });
    map_.format = "megatron-legacy";
    map_.path = dir;
    return std::move(map_);
  }

 private:
  const LegacyFolder& folder_;
  std::vector<std::vector<std::optional<Box>>> boxes_;
  std::vector<size_t> tp_of_stage_;
  std::vector<Entry> entries_;
  StorageMap map_;
  size_t seq_ = 0;
};

// The moment a state field is, if one the map places.
std::optional<Category> moment(const std::string& field) {
  if (field == "exp_avg") return kExpAvg;
  if (field == "exp_avg_sq") return kExpAvgSq;
  if (field == "param") return kMain;  // distrib_optim.pt's name for the fp32 mains
  return std::nullopt;
}

std::string field_of(const std::string& name) {
  return name.substr(name.rfind('.') + 1);
}

// model_optim_rng.pt's tensors: the model, the mains by their param groups, torch Adam's state by its keys.
void add_rank_file(Builder& b, size_t file, size_t r, const RankContent& rank) {
  for (size_t i = 0; i < rank.model.size(); ++i)
    b.add(file, r, "model." + rank.model[i].name, rank.model[i].tensor, i, kModel);
  std::string why;
  std::vector<std::vector<size_t>> members;
  const auto slots = map_mains(rank, why, &members);
  std::map<std::pair<size_t, size_t>, size_t> main_param;  // (group, index) -> model index
  std::map<int64_t, size_t> state_param;                   // Adam state key -> model index
  if (slots) {
    for (const auto& s : *slots) main_param[{s.group, s.index}] = s.model;
    for (size_t g = 0; g < members.size() && g < rank.groups.size(); ++g)
      if (rank.groups[g].ids.size() == members[g].size())
        for (size_t j = 0; j < members[g].size(); ++j) state_param[rank.groups[g].ids[j]] = members[g][j];
  }
  for (size_t g = 0; g < rank.mains.size(); ++g)
    for (size_t m = 0; m < rank.mains[g].size(); ++m) {
      const auto it = main_param.find({g, m});
      b.add(file, r, "optimizer.fp32_from_fp16_params." + std::to_string(g) + "." + std::to_string(m),
            rank.mains[g][m], it == main_param.end() ? std::nullopt : std::optional<size_t>(it->second),
            kMain);
    }
  for (const auto& t : rank.optimizer_tensors) {
    const auto it = state_param.find(t.key);
    const auto m = moment(field_of(t.name));
    const bool placed = it != state_param.end() && m && *m != kMain;
    b.add(file, r, "optimizer.optimizer." + t.name, t.tensor,
          placed ? std::optional<size_t>(it->second) : std::nullopt, placed ? *m : kOwnRank);
  }
}

// distrib_optim.pt's coalesced buffer: each placed param's run of the mains and moments, the rest whole.
void add_distopt_file(Builder& b, size_t file, size_t r, const RankContent& rank, const DistOptState& d) {
  for (const auto& [name, t] : d.tensors) {
    const auto m = moment(field_of(name));
    const bool coalesced = !d.slots.empty() && name.rfind("0.", 0) == 0 && m && t.dtype == DType::F32 &&
                           t.shape.size() == 1 && t.numel() == d.numel_unpadded && t.is_contiguous();
    if (!coalesced) {
      b.add(file, r, "distrib_optim." + name, t, std::nullopt, kOwnRank);
      continue;
    }
    for (const auto& s : d.slots)
      b.add(file, r, "distrib_optim." + name + "." + rank.model[s.model].name, t, s.model, *m, s.start,
            rank.model[s.model].tensor.numel());
  }
}

}  // namespace

StorageMap legacy_storage_map(const LegacyFolder& folder, const std::vector<RankContent>& ranks,
                              const std::vector<const DistOptState*>& distopts) {
  Builder b(folder, ranks);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& rf = folder.ranks[r];
    add_rank_file(b, b.add_file(rf.shown, rf.model_file), r, ranks[r]);
    if (!rf.distrib_optim) continue;
    const size_t f =
        b.add_file(rf.name + "/distrib_optim.pt",
                   (std::filesystem::path(rf.model_file).parent_path() / "distrib_optim.pt").string());
    if (r < distopts.size() && distopts[r] && distopts[r]->readable())
      add_distopt_file(b, f, r, ranks[r], *distopts[r]);
  }
  return b.finish(folder.dir);
}

}  // namespace ckptdoc::megatron_legacy
