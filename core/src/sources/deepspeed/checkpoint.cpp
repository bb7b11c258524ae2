// Checkpoint: opening (via CatalogBuilder), the cache of parsed files, and per-rank tensor access.
#include "ckptdoc/sources/deepspeed/checkpoint.h"

#include <algorithm>

#include "ckptdoc/error.h"
#include "ckptdoc/io/fs_error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/foreign_paths.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "ckptdoc/weights/weights_source.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/catalog_describe.h"
#include "sources/deepspeed/catalog_job.h"
#include "sources/deepspeed/module_entries.h"
#include "sources/deepspeed/tensor_slice.h"
#include "sources/deepspeed/value_access.h"
#include "sources/deepspeed/weights_only.h"

namespace ckptdoc::deepspeed {

using namespace detail;

std::shared_ptr<Checkpoint> Checkpoint::open_slice(const std::string& path, const OpenOptions& options,
                                                   std::shared_ptr<FileCache> cache) {
  std::shared_ptr<Checkpoint> ck(new Checkpoint());
  ck->options_ = options;
  ck->path_ = path;
  if (cache) ck->cache_ = std::move(cache);
  if (!options.tag && is_weights_path(path)) {
    ck->weights_ = weights::WeightsSource::open(path);
    ck->catalog_ = catalog_of(*ck->weights_);
    describe_for_front_ends(ck->catalog_);
    return ck;
  }
  CatalogBuilder(*ck).build(path, options);
  // A Trainer / Accelerate checkpoint-N/ folder: the model's weights beside `latest` and the tag folder.
  if (const auto w = weights::WeightsSource::weights_in_folder(ck->catalog_.save_dir)) {
    try {
      ck->weights_ = weights::WeightsSource::open(*w);
    } catch (const Error& e) {
      // A warning, not the table's error: the checkpoint itself is whole, only the weights beside it are not.
      ck->catalog_.problems.push_back(
          {model::Code::ShardUnreadable, model::Severity::Warning,
           "the model weights beside the checkpoint cannot be read: " + std::string(e.what()), *w});
    }
  }
  describe_for_front_ends(ck->catalog_);
  return ck;
}

// A function-try-block: a std::filesystem error from anywhere in opening leaves as an Error (io/fs_error.h).
std::shared_ptr<Checkpoint> Checkpoint::open(const std::string& path, const OpenOptions& options) try {
  // A path another source reads is refused naming the commands that read it
  // (sources/deepspeed/foreign_paths.h).
  check_not_foreign_path(path);
  std::shared_ptr<Checkpoint> ck = open_slice(path, options, nullptr);
  if (options.mp_rank != 0 || !ck->catalog_.topology.model_parallel()) return ck;
  // The whole job: every mp rank's catalog, its problems (labelled with its coordinates) and what only the
  // slices side by side show.
  std::vector<std::shared_ptr<const Checkpoint>> slices{ck};
  for (int m = 1; m < ck->slice_count(); ++m) {
    OpenOptions o = options;
    o.mp_rank = m;
    std::shared_ptr<const Checkpoint> s;
    try {
      s = open_slice(path, o, ck->cache_);
    } catch (const Error& e) {
      const Topology& t = ck->catalog_.topology;
      Problem& p = ck->catalog_.problems.emplace_back(
          model::Code::ModelFileMissing, slice_label(t, t.stage_of(m), t.tp_of(m)) + ": mp rank " +
                                             std::to_string(m) + " cannot be read at all: " + e.what());
      p.pp = t.stage_of(m);
      p.tp = t.tp_of(m);
      continue;
    }
    for (const auto& p : s->catalog_.problems) ck->catalog_.problems.push_back(p);
    ck->slices_[m] = s;
    slices.push_back(s);
  }
  add_job_problems(slices, ck->catalog_.problems);
  return ck;
} catch (const std::filesystem::filesystem_error& e) {
  throw io::error_from(e);
}

std::shared_ptr<const Checkpoint> Checkpoint::slice(int mp_rank) const {
  if (mp_rank == catalog_.mp_rank) return shared_from_this();
  if (mp_rank < 0 || mp_rank >= slice_count())
    throw Error(ErrorKind::InvalidRequest, catalog_.tag_dir, "mp rank " + std::to_string(mp_rank),
                "no such model-parallel rank (the job has " + std::to_string(slice_count()) + ")");
  std::lock_guard<std::mutex> lock(slices_mutex_);
  auto it = slices_.find(mp_rank);
  if (it != slices_.end()) return it->second;
  OpenOptions o = options_;
  o.mp_rank = mp_rank;
  auto s = open_slice(path_, o, cache_);
  slices_[mp_rank] = s;
  return s;
}

const TorchFile& Checkpoint::open_cached(const std::string& abs_path) const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  auto& files = cache_->files;
  auto it = files.find(abs_path);
  if (it != files.end()) {
    if (!it->second) throw Error(abs_path, "", "could not be read (see the catalog problems)");
    return *it->second;
  }
  try {
    auto f =
        std::make_shared<TorchFile>(snapshot_ ? snapshot_->open_file(abs_path) : TorchFile::open(abs_path));
    files[abs_path] = f;
    return *f;
  } catch (...) {
    files[abs_path] = nullptr;  // remember the failure; do not parse a broken file twice
    throw;
  }
}

std::shared_ptr<const TorchFile> Checkpoint::open_transient(const std::string& abs_path) const {
  return std::make_shared<const TorchFile>(snapshot_ ? snapshot_->open_file(abs_path)
                                                     : TorchFile::open(abs_path));
}

void Checkpoint::check_unchanged() const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  for (const auto& [path, f] : cache_->files)
    if (f && f->file) f->file->check_unchanged();
}

const TorchFile& Checkpoint::file(const std::string& relative_path) const {
  for (const auto& f : catalog_.files)
    if (f.path == relative_path) return open_cached(f.abs_path);
  throw Error(ErrorKind::NotFound, catalog_.tag_dir, relative_path, "no such file in the tag folder");
}

const TorchFile& Checkpoint::model_file(int mp_rank, int dp_rank) const {
  if (mp_rank < 0) mp_rank = catalog_.mp_rank;
  const CheckpointFile* f = catalog_.model_file(mp_rank, dp_rank);
  if (!f) {
    throw Error(ErrorKind::NotFound, catalog_.tag_dir,
                "mp rank " + std::to_string(mp_rank) + ", dp rank " + std::to_string(dp_rank),
                "no model-states file");
  }
  return open_cached(f->abs_path);
}

const TorchFile& Checkpoint::optim_file(int dp_rank, int mp_rank) const {
  if (mp_rank < 0) mp_rank = catalog_.mp_rank;
  const CheckpointFile* f = catalog_.optim_file(dp_rank, mp_rank);
  if (!f) {
    throw Error(ErrorKind::NotFound, catalog_.tag_dir,
                "dp rank " + std::to_string(dp_rank) + ", mp rank " + std::to_string(mp_rank),
                "no optimizer-states file");
  }
  return open_cached(f->abs_path);
}

const Value& Checkpoint::optimizer_state(int dp_rank, int mp_rank) const {
  if (catalog_.universal) return open_cached(catalog_.universal->zero_dir + "/optimizer_state.pt").root;
  if (catalog_.optim_file(dp_rank, mp_rank)) {
    const TorchFile& f = optim_file(dp_rank, mp_rank);
    if (const Value* osd = dict_get(&f.root, "optimizer_state_dict")) return *osd;
    throw Error(ErrorKind::Corrupt, f.path, "key 'optimizer_state_dict'", "missing");
  }
  const auto w = catalog_.wrapper;
  if (w == OptimizerWrapper::Zero12 || w == OptimizerWrapper::Zero3 || w == OptimizerWrapper::BF16Optimizer)
    throw Error(ErrorKind::NotFound, catalog_.tag_dir,
                "dp rank " + std::to_string(dp_rank) + ", mp rank " + std::to_string(mp_rank),
                "the optimizer-states file is missing");
  const TorchFile& m = model_file(mp_rank, dp_rank);
  if (const Value* opt = dict_get(&m.root, "optimizer")) return *opt;
  throw Error(ErrorKind::NotFound, m.path, "key 'optimizer'", "no optimizer state in this checkpoint");
}

namespace {
// The key of the list of fp32 partitions, by wrapper; nullptr for wrappers that keep none.
const char* partition_list_key(OptimizerWrapper w) {
  switch (w) {
    case OptimizerWrapper::Zero12:
    case OptimizerWrapper::BF16Optimizer:
      return "single_partition_of_fp32_groups";
    case OptimizerWrapper::Zero3:
      return "fp32_flat_groups";
    case OptimizerWrapper::FP16Optimizer:
      return "fp32_groups_flat";
    default:
      return nullptr;
  }
}

const Value* moment_entry(const Value& osd, OptimizerWrapper w, int group, std::string* where) {
  if (w == OptimizerWrapper::Zero3 || w == OptimizerWrapper::FP16Optimizer ||
      w == OptimizerWrapper::FP16UnfusedOptimizer) {
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

namespace {
// The group's position in the rank files' lists (expert groups: one list entry for all ep ranks).
size_t file_index(const Catalog& c, int group) {
  return group >= 0 && static_cast<size_t>(group) < c.groups.size()
             ? static_cast<size_t>(c.groups[static_cast<size_t>(group)].file_group)
             : static_cast<size_t>(group);
}
}  // namespace

std::string Checkpoint::state_file_path(int dp_rank) const {
  if (const CheckpointFile* f = catalog_.optim_file(dp_rank, catalog_.mp_rank)) return f->abs_path;
  if (const CheckpointFile* m = catalog_.model_file(catalog_.mp_rank, dp_rank)) return m->abs_path;
  return catalog_.tag_dir;
}

std::optional<Tensor> Checkpoint::fp32_partition(int group, int dp_rank) const {
  if (catalog_.universal) return dp_rank == 0 ? universal_tensor(group, "fp32") : std::nullopt;
  if (catalog_.wrapper == OptimizerWrapper::FP16UnfusedOptimizer) return unfused_master(group, dp_rank);
  const char* key = partition_list_key(catalog_.wrapper);
  if (!key) return std::nullopt;                // a wrapper without fp32 partitions
  const Value& osd = optimizer_state(dp_rank);  // throws naming a missing or unreadable file
  const size_t fg = file_index(catalog_, group);
  const Value* t = list_at(dict_get(&osd, key), fg);
  if (!t || !t->is_tensor())
    throw Error(ErrorKind::Inconsistent, state_file_path(dp_rank),
                "key '" + std::string(key) + "[" + std::to_string(fg) + "]'",
                "the fp32 partition of dp rank " + std::to_string(dp_rank) + " is missing");
  return t->as_tensor();
}

std::optional<Tensor> Checkpoint::moment_partition(int group, int dp_rank, const std::string& key) const {
  if (catalog_.universal) return dp_rank == 0 ? universal_tensor(group, key) : std::nullopt;
  const Value& osd = optimizer_state(dp_rank);  // throws naming a missing or unreadable file
  std::string where;
  const size_t fg = file_index(catalog_, group);
  const Value* t = dict_get(moment_entry(osd, catalog_.wrapper, static_cast<int>(fg), &where), key);
  if (t && t->is_tensor() && !t->as_tensor().shape.empty())  // 0-dim: a scalar such as step
    return catalog_.wrapper == OptimizerWrapper::FP16UnfusedOptimizer ? detail::flat_view(t->as_tensor())
                                                                      : t->as_tensor();
  // Absent here: fine when no rank holds it (a fresh optimizer), lost when another rank does.
  const auto& keys = catalog_.group_state_keys;  // per file group
  const bool expected =
      fg < keys.size() && std::find(keys[fg].begin(), keys[fg].end(), key) != keys[fg].end();
  if (expected)
    throw Error(ErrorKind::Inconsistent, state_file_path(dp_rank), where + "['" + key + "']",
                "missing on dp rank " + std::to_string(dp_rank) + " while other ranks hold it");
  return std::nullopt;
}

std::optional<Tensor> Checkpoint::module_tensor(const std::string& name) const {
  try {
    const auto loc = locate_module_entry(catalog_, name);
    if (!loc || !loc->file) return std::nullopt;
    const TorchFile& f = open_cached(loc->file->abs_path);
    const Value* d = loc->in_module ? dict_get(&f.root, "module") : &f.root;
    const Value* t = dict_get(d, loc->key);
    if (!t || !t->is_tensor()) return std::nullopt;
    return t->as_tensor();
  } catch (const Error&) {
    return std::nullopt;
  }
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
    const auto found = module_tensor(name);
    if (!found) return std::nullopt;
    const Tensor& tensor = *found;
    if (catalog_.wrapper == OptimizerWrapper::Zero3) {
      // ZeRO-3 module entries are placeholders (Size([0]), or Size([1]) before v0.6.0) unless the param is
      // tiny.
      if (auto gp = catalog_.find_param(name)) {
        const auto& p =
            catalog_.groups[static_cast<size_t>(gp->first)].params[static_cast<size_t>(gp->second)];
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
