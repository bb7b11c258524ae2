#pragma once
// An attached DeepSpeed checkpoint: the catalog plus lazy, memory-mapped access to every tensor. Opening
// reads the `latest` file, zip directories and pickles only; tensor bytes are read when a param is assembled.
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/sources/deepspeed/catalog.h"
#include "ckptdoc/sources/deepspeed/open_options.h"

namespace ckptdoc::weights {
class WeightsSource;
}
namespace ckptdoc::snapshot {
class Snapshot;
}

namespace ckptdoc::deepspeed {

// The pieces of one param, assembled from every rank's partition (fp32 and moments) and the model file (lp).
struct ParamData {
  std::string name;
  std::vector<int64_t> shape;
  std::optional<Tensor> lp;    // module weight (fp16/bf16/fp32 view); absent for ZeRO-3 placeholders
  std::vector<float> fp32;     // master, numel elements; empty when unavailable
  std::vector<float> exp_avg;  // empty when the optimizer has no such state
  std::vector<float> exp_avg_sq;
};

// One model-parallel rank of a checkpoint (all of it for a data-parallel job). A tensor- or pipeline-parallel
// job has one per mp rank: `open` returns mp rank 0's, which opens the others (`slice`) and adds the problems
// that only the whole job shows (a tensor or pipeline rank missing, slices that disagree) to its catalog.
class Checkpoint : public std::enable_shared_from_this<Checkpoint> {
 public:
  // `path`: a save folder (holding `latest`), a tag folder, a single rank file (its folder is used), a
  // live-engine snapshot (or a folder of them: the newest, or --tag), whose DeepSpeed files are read from it,
  // or a weights-only source (a Hugging Face folder or a safetensors / torch weights file: catalog().kind
  // says which). Throws ckptdoc::Error only when nothing usable is there; damaged files become catalog
  // problems.
  static std::shared_ptr<Checkpoint> open(const std::string& path, const OpenOptions& options = {});

  const Catalog& catalog() const { return catalog_; }
  // The weights of a weights-only source, or those a Trainer checkpoint-N/ folder keeps beside `latest` and
  // global_stepN/ (model.safetensors or an index with shards); null when there are none.
  const std::shared_ptr<const weights::WeightsSource>& weights() const { return weights_; }
  bool weights_only() const { return catalog_.weights_only; }
  // The live-engine snapshot (ckptdoc_hook) this checkpoint is read from; null for files on disk.
  const snapshot::Snapshot* snapshot() const { return snapshot_.get(); }

  // The job's model-parallel ranks (catalog().topology.mp_world_size; 1 for a data-parallel job), each opened
  // once; slice(catalog().mp_rank) is this one. They share the parsed-file cache. Throws ckptdoc::Error when
  // an mp rank's catalog cannot be built at all (its problems are in this catalog's problems already).
  int slice_count() const { return std::max(catalog_.topology.mp_world_size, 1); }
  std::shared_ptr<const Checkpoint> slice(int mp_rank) const;

  // Parsed files, opened once and cached (thread-safe). Throw ckptdoc::Error when unreadable.
  // mp_rank -1: this catalog's model-parallel rank.
  const TorchFile& model_file(int mp_rank = -1, int dp_rank = 0) const;
  const TorchFile& optim_file(int dp_rank, int mp_rank = -1) const;
  // The optimizer_state_dict of a rank's optim file (ZeRO/BF16), or the model file's `optimizer` entry.
  const Value& optimizer_state(int dp_rank, int mp_rank = -1) const;
  // Any parsed file of the checkpoint by its path relative to the tag folder (layer and expert files, ...).
  const TorchFile& file(const std::string& relative_path) const;

  // Per-rank flat tensors of group g (index into catalog().groups; views on mapped files): the saved fp32
  // partition and a moment ("exp_avg", "exp_avg_sq"). nullopt only where the checkpoint has none by design (a
  // wrapper without fp32 partitions; a state key no rank holds, as in a fresh optimizer). A rank file that is
  // missing or unreadable, or that lacks what the other ranks hold, throws ckptdoc::Error naming the file,
  // the key and the rank. Universal checkpoints: group g is one param, rank 0 only, and the tensors are
  // zero/<param>/fp32.pt, exp_avg.pt, ... flattened.
  std::optional<Tensor> fp32_partition(int group, int dp_rank) const;
  std::optional<Tensor> moment_partition(int group, int dp_rank, const std::string& key) const;
  // The lp weight of a param from wherever this mp rank keeps it: the module state dict, a pipeline layer
  // file, an MoE expert file (nullopt for ZeRO-3 placeholders / missing). Weights-only sources: the tensor of
  // that name. For ZeRO-3, whose module entries are placeholders, the Trainer's weights beside the checkpoint
  // when present and of the param's shape.
  std::optional<Tensor> lp_param(const std::string& name) const;
  // Any module state-dict entry (param, buffer, frozen param) by its module name, from the same places.
  std::optional<Tensor> module_tensor(const std::string& name) const;

  // Assembles one trainable param (reads only its slices).
  ParamData assemble(int group, int param_index, bool with_moments = true) const;

  // Throws ckptdoc::Error "changed while being read" naming the first file opened so far that shrank under
  // its memory map (MappedFile): call it when done reading, before trusting what was read.
  void check_unchanged() const;

 private:
  Checkpoint() = default;
  Catalog catalog_;
  std::shared_ptr<const weights::WeightsSource> weights_;
  std::shared_ptr<const snapshot::Snapshot> snapshot_;
  OpenOptions options_;
  std::string path_;
  // Parsed files, shared by the slices of one job.
  struct FileCache {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<TorchFile>> files;
  };
  std::shared_ptr<FileCache> cache_ = std::make_shared<FileCache>();
  mutable std::mutex slices_mutex_;
  mutable std::map<int, std::shared_ptr<const Checkpoint>> slices_;
  const TorchFile& open_cached(const std::string& abs_path) const;
  // Parsed and not cached: mapped while the result (or a tensor read from it) lives. For files of which there
  // may be more than the process can keep mapped (a universal folder's 3-4 per param; vm.max_map_count is
  // 65530).
  std::shared_ptr<const TorchFile> open_transient(const std::string& abs_path) const;
  static std::shared_ptr<Checkpoint> open_slice(const std::string& path, const OpenOptions& options,
                                                std::shared_ptr<FileCache> cache);
  std::optional<Tensor> universal_tensor(
      int group,
      const std::string& state) const;             // sources/deepspeed/universal_tensors.cpp
  std::string state_file_path(int dp_rank) const;  // the file a rank's optimizer state is read from
  // FP16_UnfusedOptimizer: the fp32 master of flat group `group` (one param), flattened
  // (catalog_unfused.cpp).
  std::optional<Tensor> unfused_master(int group, int dp_rank) const;
  friend class CatalogBuilder;
};

}  // namespace ckptdoc::deepspeed
