// Names of roles and wrappers, and the Catalog's lookups.
#include "ckptdoc/deepspeed/catalog.h"

#include <algorithm>

namespace ckptdoc::deepspeed {

std::string_view role_name(FileRole r) {
  switch (r) {
    case FileRole::Model:
      return "model";
    case FileRole::Optim:
      return "optim";
    case FileRole::Layer:
      return "layer";
    case FileRole::Expert:
      return "expert";
    case FileRole::ExpertOptim:
      return "expert_optim";
    case FileRole::Other:
      return "other";
  }
  return "other";
}

std::string_view wrapper_name(OptimizerWrapper w) {
  switch (w) {
    case OptimizerWrapper::None:
      return "none";
    case OptimizerWrapper::Zero12:
      return "DeepSpeedZeroOptimizer";
    case OptimizerWrapper::Zero3:
      return "DeepSpeedZeroOptimizer_Stage3";
    case OptimizerWrapper::BF16Optimizer:
      return "BF16_Optimizer";
    case OptimizerWrapper::FP16Optimizer:
      return "FP16_Optimizer";
    case OptimizerWrapper::FP16UnfusedOptimizer:
      return "FP16_UnfusedOptimizer";
    case OptimizerWrapper::TorchOptimizer:
      return "torch";
    case OptimizerWrapper::Unknown:
      return "unknown";
  }
  return "unknown";
}

const RankPartition* GroupLayout::partition_of(int dp_rank) const {
  const int k = partition_index(dp_rank);
  return k < 0 ? nullptr : &partitions[static_cast<size_t>(k)];
}

int GroupLayout::partition_index(int dp_rank) const {
  for (size_t k = 0; k < partitions.size(); ++k)
    if (partitions[k].rank == dp_rank) return static_cast<int>(k);
  return -1;
}

const CheckpointFile* Catalog::model_file(int mp_rank, int dp_rank) const {
  if (mp_rank < 0) mp_rank = this->mp_rank;
  const CheckpointFile* fallback = nullptr;
  for (const auto& f : files) {
    if (f.role != FileRole::Model || f.mp_rank != mp_rank) continue;
    if (f.dp_rank == dp_rank) return &f;
    if (f.dp_rank < 0 && !fallback) fallback = &f;  // ZeRO <= 2: one model file per mp rank
  }
  return fallback;
}

const CheckpointFile* Catalog::metadata_model_file() const {
  if (metadata_model_index >= 0 && static_cast<size_t>(metadata_model_index) < files.size()) {
    const CheckpointFile& f = files[static_cast<size_t>(metadata_model_index)];
    if (f.role == FileRole::Model && f.mp_rank == mp_rank) return &f;
  }
  const CheckpointFile* mf = model_file(mp_rank, 0);
  // ZeRO-3 on node-local storage: a node has only its own ranks' model files, which hold the same metadata.
  if (!mf)
    for (const auto& f : files)
      if (f.role == FileRole::Model && f.mp_rank == mp_rank && f.dp_rank > 0 &&
          (!mf || f.dp_rank < mf->dp_rank))
        mf = &f;
  return mf;
}

const CheckpointFile* Catalog::optim_file(int dp_rank, int mp_rank) const {
  if (mp_rank < 0) mp_rank = this->mp_rank;
  for (const auto& f : files) {
    if (f.role == FileRole::Optim && f.mp_rank == mp_rank && f.dp_rank == dp_rank) return &f;
  }
  return nullptr;
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

std::string slice_label(const Topology& t, int pp, int tp) {
  std::string s;
  if (t.pp > 1) s = "pp " + std::to_string(pp);
  if (t.tp > 1) s += (s.empty() ? "" : ", ") + std::string("tp ") + std::to_string(tp);
  return s;
}

std::string Catalog::slice_label() const {
  return topology.model_parallel() ? deepspeed::slice_label(topology, pp_stage, tp_rank) : std::string();
}

}  // namespace ckptdoc::deepspeed
