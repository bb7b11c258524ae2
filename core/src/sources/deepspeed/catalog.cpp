// Names of roles and wrappers, and the DeepSpeed catalog's file lookups (the neutral ones:
// model/catalog.cpp).
#include "ckptdoc/sources/deepspeed/catalog.h"

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

}  // namespace ckptdoc::deepspeed
