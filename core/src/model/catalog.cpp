// The neutral catalog's lookups: flat groups, params and the model-parallel slice.
#include "ckptdoc/model/catalog.h"

#include <algorithm>

namespace ckptdoc::model {

const RankPartition* GroupLayout::partition_of(int dp_rank) const {
  const int k = partition_index(dp_rank);
  return k < 0 ? nullptr : &partitions[static_cast<size_t>(k)];
}

int GroupLayout::partition_index(int dp_rank) const {
  for (size_t k = 0; k < partitions.size(); ++k)
    if (partitions[k].rank == dp_rank) return static_cast<int>(k);
  return -1;
}

std::string slice_label(const Topology& t, int pp, int tp) {
  std::string s;
  if (t.pp > 1) s = "pp " + std::to_string(pp);
  if (t.tp > 1) s += (s.empty() ? "" : ", ") + std::string("tp ") + std::to_string(tp);
  return s;
}

std::optional<std::pair<int, int>> Catalog::find_param(const std::string& name) const {
  for (const auto& g : groups) {
    for (size_t i = 0; i < g.params.size(); ++i) {
      if (g.params[i].name == name) return std::make_pair(g.index, static_cast<int>(i));
    }
  }
  return std::nullopt;
}

int64_t Catalog::trainable_numel() const {
  int64_t n = 0;
  for (const auto& g : groups) n += g.numel;
  return n;
}

int Catalog::file_group_count() const {
  int n = 0;
  for (const auto& g : groups) n = std::max(n, g.file_group + 1);
  return n;
}

const GroupLayout* Catalog::group_in_file(int file_group, int dp_rank) const {
  for (const auto& g : groups)
    if (g.file_group == file_group && g.partition_of(dp_rank)) return &g;
  return nullptr;
}

std::string Catalog::slice_label() const {
  return topology.model_parallel() ? model::slice_label(topology, pp_stage, tp_rank) : std::string();
}

}  // namespace ckptdoc::model
