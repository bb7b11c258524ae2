#pragma once
// What a DeepSpeed checkpoint holds, read from zip directories and pickles only (no tensor bytes): the tag,
// the files and their roles, ZeRO stage, dtypes, world sizes, param groups with their flat partition layout,
// and every problem met while reading. deepspeed-format.md (in shared/design) is the reference.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/deepspeed/universal_info.h"
#include "ckptdoc/dtype.h"

namespace ckptdoc::deepspeed {

// The largest data-parallel, model-parallel or partition count ckptdoc lays out (also the largest
// repair --world-size). A file claiming more is refused as damaged, before anything is sized by it.
inline constexpr int kMaxWorldSize = 65536;

enum class FileRole : uint8_t { Model, Optim, Layer, Expert, ExpertOptim, Other };
std::string_view role_name(FileRole r);  // "model", "optim", "layer", "expert", "expert_optim", "other"

struct CheckpointFile {
  std::string path;      // relative to the tag folder
  std::string abs_path;
  FileRole role = FileRole::Other;
  int dp_rank = -1;      // -1 when the name carries none
  int mp_rank = -1;
  uint64_t bytes = 0;
  bool bf16_prefix = false;  // "bf16_zero_pp_rank_..."
};

enum class OptimizerWrapper : uint8_t {
  None,              // no optimizer state saved
  Zero12,            // DeepSpeedZeroOptimizer (ZeRO-1/2)
  Zero3,             // DeepSpeedZeroOptimizer_Stage3
  BF16Optimizer,     // BF16_Optimizer (ZeRO-1 layout, no zero_stage key)
  FP16Optimizer,     // FP16_Optimizer (state inside the model file)
  FP16UnfusedOptimizer,
  TorchOptimizer,    // raw torch optimizer state inside the model file
  Unknown
};
std::string_view wrapper_name(OptimizerWrapper w);  // "DeepSpeedZeroOptimizer", "DeepSpeedZeroOptimizer_Stage3",
                                                    // "BF16_Optimizer", "FP16_Optimizer", ...

// One contiguous run of a param's elements inside one rank's flat partition.
struct Fragment {
  int param = 0;              // index into GroupLayout::params
  int64_t param_offset = 0;   // first element of the param covered
  int64_t partition_offset = 0;  // where it sits in the rank's partition
  int64_t numel = 0;
};

struct RankPartition {
  int rank = 0;
  int64_t saved_numel = 0;  // length of the fp32 tensor saved for this rank (lean for ZeRO-1/2, padded for BF16)
  int64_t padding = 0;      // padding elements inside this rank's partition (partition_numel - real_numel)
  int64_t real_numel = 0;   // param elements inside this rank's partition
  int64_t recorded_padding = 0;  // what DeepSpeed's version writes in `group_paddings` for this rank (§5.1/§5.2)
  std::vector<Fragment> fragments;
};

struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t offset = 0;  // ZeRO-1/2/BF16: offset in the group's flat buffer. ZeRO-3: offset in each rank's
                       // sub-group partition (sum of ceil(numel/dp) of the params before it)
};

// A flat group: an optimizer param group (ZeRO-1/2, BF16) or a ZeRO-3 sub-group.
struct GroupLayout {
  int index = 0;
  int64_t numel = 0;            // sum of param numels
  int64_t padded_numel = 0;     // dp * partition_numel
  int64_t partition_numel = 0;  // P: per-rank partition length
  std::vector<ParamEntry> params;
  std::vector<RankPartition> partitions;  // one per dp rank
};

// Problem codes the catalog emits: "rank-file-missing", "rank-file-truncated", "rank-file-unreadable",
// "world-size-mismatch", "shape-mismatch", "layout-mismatch", "model-file-missing", "unknown-schema",
// "legacy-param-shapes", "round-robin-order", "unsafe-pickle", "rank-file-renamed", "optimizer-state-incomplete".
struct Problem {
  std::string code;      // stable finding code, e.g. "rank-file-missing"
  std::string severity;  // "error" | "warning" | "info"
  std::string message;   // plain words: what happened and what to do
  std::string file;      // relative path, when one file is concerned
  std::vector<int> ranks;
  std::vector<std::string> params;
  // Named facts behind the problem, for JSON and tools: unsafe-pickle has file, record, callable, how.
  std::map<std::string, std::string> details = {};
};

struct LossScalerInfo {
  bool present = false;
  bool dynamic = false;
  double cur_scale = 0;
  double min_scale = 0;
  int64_t cur_iter = 0;
  int64_t last_overflow_iter = -1;
};

// The wrapped torch optimizer's state of one flat group (ZeRO-1/2/BF16: a param group; ZeRO-3: a sub-group), as
// rank 0's optimizer file (or the model file's `optimizer`) saved it.
struct OptimizerGroupState {
  std::optional<int64_t> step;  // Adam's own step count; absent when the state holds none
  double beta1 = 0.9, beta2 = 0.999;  // from the param group's `betas` (torch's defaults when absent)
  bool has_state = false;       // a state entry exists for the group
};

struct Catalog {
  // "deepspeed", or for a weights-only source (weights/weights_source.h): "hf-folder" | "weights-file".
  std::string kind = "deepspeed";
  std::string save_dir;  // folder holding `latest` (or the tag folder's parent)
  std::string tag;
  std::string tag_dir;   // absolute
  int zero_stage = 0;
  DType lp_dtype = DType::F32;
  OptimizerWrapper wrapper = OptimizerWrapper::Unknown;
  int dp_world_size = 0;     // from the model file
  int mp_world_size = 0;
  int optim_file_count = 0;  // optimizer files found for mp rank 0
  std::vector<int> partition_count;  // per group, from the optimizer files
  std::string ds_version;
  std::vector<CheckpointFile> files;
  std::vector<GroupLayout> groups;
  std::vector<std::string> buffer_names;
  std::vector<ParamEntry> frozen_params;        // name + shape
  std::map<std::string, std::string> shared_params;  // alias -> owner
  std::vector<std::pair<std::string, std::string>> shared_params_in_order;  // (alias, owner) as saved
  std::vector<std::string> module_keys;         // module state-dict keys in file order
  int64_t global_steps = 0, skipped_steps = 0, global_samples = 0;
  std::optional<int64_t> optimizer_step;        // Adam step of group 0, rank 0
  std::vector<OptimizerGroupState> optimizer_groups;  // per flat group (index = GroupLayout::index)
  std::vector<std::string> optimizer_state_keys;  // e.g. exp_avg, exp_avg_sq
  // Per flat group: the tensor state keys (exp_avg, ...) any rank holds; every rank must hold them all.
  std::vector<std::vector<std::string>> group_state_keys;
  std::string optimizer_name_hint;              // from ds_config when present, e.g. "AdamW"
  LossScalerInfo loss_scaler;
  std::string lr_scheduler_summary;
  std::vector<Problem> problems;  // what is missing or odd, found while cataloguing
  // Set when the folder is a universal checkpoint: then every trainable param is its own flat group with one
  // unpartitioned "rank" 0 (the tensors of zero/<param>/), dp_world_size is 0 and optim_file_count 1.
  std::optional<UniversalInfo> universal;

  const CheckpointFile* model_file(int mp_rank = 0, int dp_rank = 0) const;
  const CheckpointFile* optim_file(int dp_rank, int mp_rank = 0) const;
  // The model file the catalog reads names, shapes and config from: mp rank 0's (ZeRO-3: dp rank 0's, or the
  // lowest dp rank present when a node holds only its own ranks' files).
  const CheckpointFile* metadata_model_file() const;
  // Group and index of a trainable param by name; nullopt when not trainable/unknown.
  std::optional<std::pair<int, int>> find_param(const std::string& name) const;
  int64_t trainable_numel() const;
};

}  // namespace ckptdoc::deepspeed
