// Checkpoint: opening (via CatalogBuilder), the cache of parsed files, and per-rank tensor access.
#include "ckptdoc/deepspeed/checkpoint.h"

#include "ckptdoc/error.h"
#include "ckptdoc/snapshot/snapshot.h"
#include "deepspeed/catalog_builder.h"
#include "deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

std::shared_ptr<Checkpoint> Checkpoint::open(const std::string& path, const OpenOptions& options) {
  std::shared_ptr<Checkpoint> ck(new Checkpoint());
  CatalogBuilder(*ck).build(path, options);
  return ck;
}

const TorchFile& Checkpoint::open_cached(const std::string& abs_path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = open_files_.find(abs_path);
  if (it != open_files_.end()) {
    if (!it->second) throw Error(abs_path, "", "could not be read (see the catalog problems)");
    return *it->second;
  }
  try {
    auto f = std::make_shared<TorchFile>(snapshot_ ? snapshot_->open_file(abs_path) : TorchFile::open(abs_path));
    open_files_[abs_path] = f;
    return *f;
  } catch (...) {
    open_files_[abs_path] = nullptr;  // remember the failure; do not parse a broken file twice
    throw;
  }
}

const TorchFile& Checkpoint::model_file(int mp_rank, int dp_rank) const {
  const CheckpointFile* f = catalog_.model_file(mp_rank, dp_rank);
  if (!f) {
    throw Error(catalog_.tag_dir, "mp rank " + std::to_string(mp_rank) + ", dp rank " + std::to_string(dp_rank),
                "no model-states file");
  }
  return open_cached(f->abs_path);
}

const TorchFile& Checkpoint::optim_file(int dp_rank, int mp_rank) const {
  const CheckpointFile* f = catalog_.optim_file(dp_rank, mp_rank);
  if (!f) {
    throw Error(catalog_.tag_dir, "dp rank " + std::to_string(dp_rank) + ", mp rank " + std::to_string(mp_rank),
                "no optimizer-states file");
  }
  return open_cached(f->abs_path);
}

const Value& Checkpoint::optimizer_state(int dp_rank, int mp_rank) const {
  if (catalog_.optim_file(dp_rank, mp_rank)) {
    const TorchFile& f = optim_file(dp_rank, mp_rank);
    if (const Value* osd = dict_get(&f.root, "optimizer_state_dict")) return *osd;
    throw Error(f.path, "key 'optimizer_state_dict'", "missing");
  }
  const TorchFile& m = model_file(mp_rank, dp_rank);
  if (const Value* opt = dict_get(&m.root, "optimizer")) return *opt;
  throw Error(m.path, "key 'optimizer'", "no optimizer state in this checkpoint");
}

namespace {
const Value* partition_list(const Value& osd, OptimizerWrapper w) {
  switch (w) {
    case OptimizerWrapper::Zero12:
    case OptimizerWrapper::BF16Optimizer:
      return dict_get(&osd, "single_partition_of_fp32_groups");
    case OptimizerWrapper::Zero3:
      return dict_get(&osd, "fp32_flat_groups");
    case OptimizerWrapper::FP16Optimizer:
      return dict_get(&osd, "fp32_groups_flat");
    default:
      return nullptr;
  }
}

const Value* moment_entry(const Value& osd, OptimizerWrapper w, int group) {
  if (w == OptimizerWrapper::Zero3 || w == OptimizerWrapper::FP16Optimizer) {
    return int_key(dict_get(dict_get(&osd, "optimizer_state_dict"), "state"), group);
  }
  const Value* base = dict_get(&osd, "base_optimizer_state");
  if (base && base->is_sequence()) return list_at(base, static_cast<size_t>(group));
  return int_key(dict_get(base, "state"), group);
}
}  // namespace

std::optional<Tensor> Checkpoint::fp32_partition(int group, int dp_rank) const {
  try {
    const Value& osd = optimizer_state(dp_rank);
    const Value* t = list_at(partition_list(osd, catalog_.wrapper), static_cast<size_t>(group));
    if (t && t->is_tensor()) return t->as_tensor();
  } catch (const Error&) {
  }
  return std::nullopt;
}

std::optional<Tensor> Checkpoint::moment_partition(int group, int dp_rank, const std::string& key) const {
  try {
    const Value& osd = optimizer_state(dp_rank);
    const Value* t = dict_get(moment_entry(osd, catalog_.wrapper, group), key);
    if (t && t->is_tensor() && t->as_tensor().numel() > 1) return t->as_tensor();
  } catch (const Error&) {
  }
  return std::nullopt;
}

std::optional<Tensor> Checkpoint::lp_param(const std::string& name) const {
  try {
    const TorchFile& m = model_file(0, 0);
    const Value* t = dict_get(dict_get(&m.root, "module"), name);
    if (!t || !t->is_tensor()) return std::nullopt;
    const Tensor& tensor = t->as_tensor();
    if (catalog_.wrapper == OptimizerWrapper::Zero3) {
      // ZeRO-3 module entries are placeholders (Size([0]), or Size([1]) before v0.6.0) unless the param is tiny.
      if (auto gp = catalog_.find_param(name)) {
        const auto& p = catalog_.groups[static_cast<size_t>(gp->first)].params[static_cast<size_t>(gp->second)];
        if (tensor.numel() != p.numel || tensor.shape != p.shape) return std::nullopt;
      }
    }
    if (tensor.numel() == 0 && !tensor.shape.empty()) {
      bool real_empty = false;
      for (auto d : tensor.shape) real_empty = real_empty || d == 0;
      if (tensor.shape.size() == 1 && tensor.shape[0] == 0) return std::nullopt;
      if (!real_empty) return std::nullopt;
    }
    return tensor;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace ckptdoc::deepspeed
