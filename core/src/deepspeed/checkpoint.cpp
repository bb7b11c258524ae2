// Checkpoint: opening (via CatalogBuilder), the cache of parsed files, and per-rank tensor access.
#include "ckptdoc/deepspeed/checkpoint.h"

#include <algorithm>

#include "ckptdoc/error.h"
#include "ckptdoc/weights/weights_source.h"
#include "ckptdoc/snapshot/snapshot.h"
#include "deepspeed/catalog_builder.h"
#include "deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

std::shared_ptr<Checkpoint> Checkpoint::open(const std::string& path, const OpenOptions& options) {
  std::shared_ptr<Checkpoint> ck(new Checkpoint());
  if (!options.tag && weights::WeightsSource::is_weights_path(path)) {
    ck->weights_ = weights::WeightsSource::open(path);
    ck->catalog_ = weights::catalog_of(*ck->weights_);
    return ck;
  }
  CatalogBuilder(*ck).build(path, options);
  // A Trainer / Accelerate checkpoint-N/ folder: the model's weights beside `latest` and the tag folder.
  if (const auto w = weights::WeightsSource::weights_in_folder(ck->catalog_.save_dir)) {
    try {
      ck->weights_ = weights::WeightsSource::open(*w);
    } catch (const Error& e) {
      ck->catalog_.problems.push_back({"shard-unreadable", "warning",
                                       "the model weights beside the checkpoint cannot be read: " + std::string(e.what()),
                                       *w, {}, {}});
    }
  }
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

void Checkpoint::check_unchanged() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [path, f] : open_files_)
    if (f && f->file) f->file->check_unchanged();
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
  if (catalog_.universal) return open_cached(catalog_.universal->zero_dir + "/optimizer_state.pt").root;
  if (catalog_.optim_file(dp_rank, mp_rank)) {
    const TorchFile& f = optim_file(dp_rank, mp_rank);
    if (const Value* osd = dict_get(&f.root, "optimizer_state_dict")) return *osd;
    throw Error(f.path, "key 'optimizer_state_dict'", "missing");
  }
  const auto w = catalog_.wrapper;
  if (w == OptimizerWrapper::Zero12 || w == OptimizerWrapper::Zero3 || w == OptimizerWrapper::BF16Optimizer)
    throw Error(catalog_.tag_dir, "dp rank " + std::to_string(dp_rank) + ", mp rank " + std::to_string(mp_rank),
                "the optimizer-states file is missing");
  const TorchFile& m = model_file(mp_rank, dp_rank);
  if (const Value* opt = dict_get(&m.root, "optimizer")) return *opt;
  throw Error(m.path, "key 'optimizer'", "no optimizer state in this checkpoint");
}

namespace {
// The key of the list of fp32 partitions, by wrapper; nullptr for wrappers that keep none.
const char* partition_list_key(OptimizerWrapper w) {
  switch (w) {
    case OptimizerWrapper::Zero12:
    case OptimizerWrapper::BF16Optimizer: return "single_partition_of_fp32_groups";
    case OptimizerWrapper::Zero3: return "fp32_flat_groups";
    case OptimizerWrapper::FP16Optimizer: return "fp32_groups_flat";
    default: return nullptr;
  }
}

const Value* moment_entry(const Value& osd, OptimizerWrapper w, int group, std::string* where) {
  if (w == OptimizerWrapper::Zero3 || w == OptimizerWrapper::FP16Optimizer) {
    *where = "optimizer_state_dict.optimizer_state_dict.state[" + std::to_string(group) + "]";
    return int_key(dict_get(dict_get(&osd, "optimizer_state_dict"), "state"), group);
  }
  const Value* base = dict_get(&osd, "base_optimizer_state");
  if (base && base->is_sequence()) {
    *where = "optimizer_state_dict.base_optimizer_state[" + std::to_string(group) + "]";
    return list_at(base, static_cast<size_t>(group));
  }
  *where = "optimizer_state_dict.base_optimizer_state.state[" + std::to_string(group) + "]";
  return int_key(dict_get(base, "state"), group);
}
}  // namespace

std::string Checkpoint::state_file_path(int dp_rank) const {
  if (const CheckpointFile* f = catalog_.optim_file(dp_rank)) return f->abs_path;
  if (const CheckpointFile* m = catalog_.model_file(0, dp_rank)) return m->abs_path;
  return catalog_.tag_dir;
}

std::optional<Tensor> Checkpoint::fp32_partition(int group, int dp_rank) const {
  if (catalog_.universal) return dp_rank == 0 ? universal_tensor(group, "fp32") : std::nullopt;
  const char* key = partition_list_key(catalog_.wrapper);
  if (!key) return std::nullopt;  // a wrapper without fp32 partitions
  const Value& osd = optimizer_state(dp_rank);  // throws naming a missing or unreadable file
  const Value* t = list_at(dict_get(&osd, key), static_cast<size_t>(group));
  if (!t || !t->is_tensor())
    throw Error(state_file_path(dp_rank), "key '" + std::string(key) + "[" + std::to_string(group) + "]'",
                "the fp32 partition of dp rank " + std::to_string(dp_rank) + " is missing");
  return t->as_tensor();
}

std::optional<Tensor> Checkpoint::moment_partition(int group, int dp_rank, const std::string& key) const {
  if (catalog_.universal) return dp_rank == 0 ? universal_tensor(group, key) : std::nullopt;
  const Value& osd = optimizer_state(dp_rank);  // throws naming a missing or unreadable file
  std::string where;
  const Value* t = dict_get(moment_entry(osd, catalog_.wrapper, group, &where), key);
  if (t && t->is_tensor() && !t->as_tensor().shape.empty()) return t->as_tensor();  // 0-dim: a scalar such as step
  // Absent here: fine when no rank holds it (a fresh optimizer), lost when another rank does.
  const auto& keys = catalog_.group_state_keys;
  const bool expected = static_cast<size_t>(group) < keys.size() &&
                        std::find(keys[static_cast<size_t>(group)].begin(), keys[static_cast<size_t>(group)].end(),
                                  key) != keys[static_cast<size_t>(group)].end();
  if (expected)
    throw Error(state_file_path(dp_rank), where + "['" + key + "']",
                "missing on dp rank " + std::to_string(dp_rank) + " while other ranks hold it");
  return std::nullopt;
}

std::optional<Tensor> Checkpoint::lp_param(const std::string& name) const {
  if (weights_only()) {
    const NamedTensor* t = weights_ ? weights_->find(name) : nullptr;
    return t ? std::optional<Tensor>(t->tensor) : std::nullopt;
  }
  if (catalog_.wrapper == OptimizerWrapper::Zero3 && weights_) {
    // ZeRO-3 module entries are placeholders; the Trainer saved the gathered 16-bit weights beside them.
    const auto gp = catalog_.find_param(name);
    const NamedTensor* t = weights_->find(name);
    if (gp && t) {
      const auto& p = catalog_.groups[static_cast<size_t>(gp->first)].params[static_cast<size_t>(gp->second)];
      if (t->tensor.shape == p.shape) return t->tensor;
    }
  }
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
