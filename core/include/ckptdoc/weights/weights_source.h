#pragma once
// A weights-only source: a Hugging Face model folder (an index with its shards, or one model.safetensors /
// pytorch_model.bin), or one safetensors / torch.save file holding a state dict. It yields the same things a
// DeepSpeed checkpoint does for analysis, export and diff (named tensors, mapped lazily, and the problems met
// while reading), so Checkpoint can attach it as a source of its own or, for a Trainer checkpoint-N/ folder,
// beside the DeepSpeed files (the model weights the Trainer saved next to global_stepN/).
//
// Opening reads the index and every file's header or pickle only. Damage does not stop it: a missing or
// unreadable shard, an index that disagrees with the shards, a tensor in two shards become problems with
// the file and tensor names, and every tensor that can be read stays available.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"  // NamedTensor
#include "ckptdoc/model/finding.h"
#include "ckptdoc/model/finding_codes.h"

namespace ckptdoc::weights {

enum class SourceKind : uint8_t { HfFolder, WeightsFile };

struct WeightsFile {
  std::string path;  // relative to the source's root folder
  std::string abs_path;
  uint64_t bytes = 0;
  std::string format;  // "safetensors" | "torch"
  bool readable = false;
  ErrorKind error_kind = ErrorKind::Other;  // why it is not readable (when readable is false)
  std::vector<std::string> tensors;         // in the file's order
  uint64_t stored_bytes = 0;                // tensor bytes the file stores (torch: each storage once)
  uint64_t stored_numel = 0;  // elements of the tensors it stores (torch: each storage's tensors once)
};

struct WeightsIndex {
  std::string path;                          // relative to the root folder
  std::optional<uint64_t> total_size;        // metadata.total_size
  std::optional<uint64_t> total_parameters;  // metadata.total_parameters (newer transformers)
  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> file, in the index's order
};

class WeightsSource {
 public:
  // A folder (index + shards, or one weights file in it) or a single weights file. Throws ckptdoc::Error when
  // nothing usable is there (no weights file, or the only file cannot be read).
  static std::shared_ptr<const WeightsSource> open(const std::string& path);
  // The weights a Hugging Face Trainer / Accelerate checkpoint-N/ folder keeps beside `latest` and
  // global_stepN/: that folder's index or model.safetensors / pytorch_model.bin; nullopt when there are none.
  static std::optional<std::string> weights_in_folder(const std::string& dir);

  SourceKind kind() const { return kind_; }
  // What a catalog calls this source and says of it (the kind is this folder's vocabulary, not its callers').
  bool is_folder() const { return kind_ == SourceKind::HfFolder; }
  const char* kind_name() const { return is_folder() ? "hf-folder" : "weights-file"; }
  const char* description() const { return is_folder() ? "Hugging Face folder" : "weights file"; }
  const std::string& root() const { return root_; }  // absolute folder
  const std::string& path() const { return path_; }  // what was opened (folder or file), absolute
  const std::vector<WeightsFile>& files() const { return files_; }
  const std::optional<WeightsIndex>& index() const { return index_; }
  // Every readable tensor, once, in load order (shards in file-name order, each in its own order).
  const std::vector<NamedTensor>& tensors() const { return tensors_; }
  const std::string& file_of(size_t tensor) const { return tensor_files_.at(tensor); }
  // A tensor by name; `module.` prefixes are ignored on both sides. Null when absent.
  const NamedTensor* find(const std::string& name) const;
  // Structural problems (codes in README's "Hugging Face folders" section), with file and tensor names.
  const std::vector<model::Finding>& problems() const { return problems_; }
  // config.json beside the weights, parsed; the positive size fields found there ("hidden_size": 4096, ...).
  const std::map<std::string, int64_t>& config_sizes() const { return config_sizes_; }
  // The most common floating dtype (float32 when there is none).
  DType main_dtype() const;

 private:
  WeightsSource() = default;
  void open_folder(const std::string& dir);
  void open_single(const std::string& file);
  void read_index(const std::string& index_path);
  void read_config();
  void add_file(const std::string& abs_path, const std::string& preferred_for);
  void check_index();
  // The code's severity from the table (model/finding_codes.h), or the one a site gives and says why.
  void problem(model::Code code, std::string message, std::string file,
               std::vector<std::string> tensors = {});
  void problem(model::Code code, model::Severity severity, std::string message, std::string file,
               std::vector<std::string> tensors = {});

  SourceKind kind_ = SourceKind::WeightsFile;
  std::string root_, path_;
  std::vector<WeightsFile> files_;
  std::optional<WeightsIndex> index_;
  std::vector<NamedTensor> tensors_;
  std::vector<std::string> tensor_files_;
  std::map<std::string, size_t> by_name_;                    // stripped name -> tensor
  std::map<std::string, std::vector<std::string>> holders_;  // tensor -> every file holding it
  std::vector<std::shared_ptr<const void>> keep_;            // parsed files whose mappings the tensors view
  std::vector<model::Finding> problems_;
  std::map<std::string, int64_t> config_sizes_;
};

// Files a Trainer or a training script keeps beside the weights that are not weights (optimizer.pt,
// training_args.bin, rng_state_0.pth, ...).
bool not_weights(const std::string& file_name);

// The files of a training run's state that a Hugging Face Trainer or Accelerate's `save_state` keeps beside
// the weights in `dir` (optimizer.bin / optimizer.pt, scheduler.*, scaler.pt, rng_state*.pth,
// random_states_<r>.pkl): a weights source reads none of them, and its verdict must not say the folder holds
// no optimizer state. Sorted; empty when there are none.
std::vector<std::string> training_state_files(const std::string& dir);

}  // namespace ckptdoc::weights
