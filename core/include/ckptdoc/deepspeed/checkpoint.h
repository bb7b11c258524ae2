#pragma once
// An attached DeepSpeed checkpoint: the catalog plus lazy, memory-mapped access to every tensor. Opening reads
// the `latest` file, zip directories and pickles only; tensor bytes are read when a param is assembled.
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/deepspeed/catalog.h"
#include "ckptdoc/format/torch_file.h"

namespace ckptdoc::snapshot {
class Snapshot;
}

namespace ckptdoc::deepspeed {

struct OpenOptions {
  std::optional<std::string> tag;  // default: the `latest` file, else the only tag folder
};

// The pieces of one param, assembled from every rank's partition (fp32 and moments) and the model file (lp).
struct ParamData {
  std::string name;
  std::vector<int64_t> shape;
  std::optional<Tensor> lp;        // module weight (fp16/bf16/fp32 view); absent for ZeRO-3 placeholders
  std::vector<float> fp32;         // master, numel elements; empty when unavailable
  std::vector<float> exp_avg;      // empty when the optimizer has no such state
  std::vector<float> exp_avg_sq;
};

class Checkpoint {
 public:
  // `path`: a save folder (holding `latest`), a tag folder, a single rank file (its folder is used), or a
  // live-engine snapshot (or a folder of them: the newest, or --tag), whose DeepSpeed files are read from it.
  // Throws ckptdoc::Error only when nothing usable is there; damaged files become catalog problems.
  static std::shared_ptr<Checkpoint> open(const std::string& path, const OpenOptions& options = {});

  const Catalog& catalog() const { return catalog_; }
  // The live-engine snapshot (ckptdoc_hook) this checkpoint is read from; null for files on disk.
  const snapshot::Snapshot* snapshot() const { return snapshot_.get(); }

  // Parsed files, opened once and cached (thread-safe). Throw ckptdoc::Error when unreadable.
  const TorchFile& model_file(int mp_rank = 0, int dp_rank = 0) const;
  const TorchFile& optim_file(int dp_rank, int mp_rank = 0) const;
  // The optimizer_state_dict of a rank's optim file (ZeRO/BF16), or the model file's `optimizer` entry.
  const Value& optimizer_state(int dp_rank, int mp_rank = 0) const;

  // Per-rank flat tensors of group g (views on mapped files): the saved fp32 partition and a moment
  // ("exp_avg", "exp_avg_sq"), nullopt when absent.
  std::optional<Tensor> fp32_partition(int group, int dp_rank) const;
  std::optional<Tensor> moment_partition(int group, int dp_rank, const std::string& key) const;
  // The lp weight of a param from the module state dict (nullopt for ZeRO-3 placeholders / missing).
  std::optional<Tensor> lp_param(const std::string& name) const;

  // Assembles one trainable param (reads only its slices).
  ParamData assemble(int group, int param_index, bool with_moments = true) const;

 private:
  Checkpoint() = default;
  Catalog catalog_;
  std::shared_ptr<const snapshot::Snapshot> snapshot_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::shared_ptr<TorchFile>> open_files_;
  const TorchFile& open_cached(const std::string& abs_path) const;
  friend class CatalogBuilder;
};

}  // namespace ckptdoc::deepspeed
