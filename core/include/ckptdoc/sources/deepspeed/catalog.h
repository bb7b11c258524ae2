#pragma once
// What a DeepSpeed checkpoint holds, read from zip directories and pickles only (no tensor bytes): the
// neutral catalog (model/catalog.h: tag, dtypes, world sizes, flat groups and their layout, problems) plus
// the files and their roles, ZeRO stage, optimizer wrapper, loss scaler and universal/AutoEP layouts.
// deepspeed-format.md (in shared/design) is the reference.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/model/catalog.h"
#include "ckptdoc/sources/deepspeed/universal_info.h"

namespace ckptdoc::deepspeed {

// The largest data-parallel, model-parallel or partition count ckptdoc lays out (also the largest
// repair --world-size). A file claiming more is refused as damaged, before anything is sized by it.
inline constexpr int kMaxWorldSize = 65536;

enum class FileRole : uint8_t { Model, Optim, Layer, Expert, ExpertOptim, Other };
std::string_view role_name(FileRole r);  // "model", "optim", "layer", "expert", "expert_optim", "other"

// A rank file and its coordinates in the job (-1 where a coordinate does not apply or is unknown).
struct CheckpointFile {
  std::string path;  // relative to the tag folder
  std::string abs_path;
  FileRole role = FileRole::Other;
  int dp_rank = -1;  // -1 when the name carries none
  int mp_rank = -1;  // model-parallel rank = pipeline stage * tp + tensor rank (layer files: derived)
  uint64_t bytes = 0;
  bool bf16_prefix = false;  // "bf16_zero_pp_rank_..."
  int pp = -1, tp = -1;      // pipeline stage and tensor-parallel rank (from mp_rank and the topology)
  int layer = -1;            // pipeline layer index (layer files) or MoE layer id (expert files)
  int expert = -1;           // global expert id (expert files)
  int ep = -1;               // expert-parallel rank (expert files, expp_rank optimizer files)
};

enum class OptimizerWrapper : uint8_t {
  None,           // no optimizer state saved
  Zero12,         // DeepSpeedZeroOptimizer (ZeRO-1/2)
  Zero3,          // DeepSpeedZeroOptimizer_Stage3
  BF16Optimizer,  // BF16_Optimizer (ZeRO-1 layout, no zero_stage key)
  FP16Optimizer,  // FP16_Optimizer (state inside the model file)
  FP16UnfusedOptimizer,
  TorchOptimizer,  // raw torch optimizer state inside the model file
  Unknown
};
std::string_view wrapper_name(
    OptimizerWrapper w);  // "DeepSpeedZeroOptimizer", "DeepSpeedZeroOptimizer_Stage3",
                          // "BF16_Optimizer", "FP16_Optimizer", ...

// A problem the catalog (or a weights source) finds while reading the files: the one finding type.
using Problem = model::Finding;

// The source-neutral layout and topology (model/), under the names the DeepSpeed code has always used.
using model::Fragment;
using model::GroupLayout;
using model::MoeLayer;
using model::OptimizerGroupState;
using model::ParamEntry;
using model::RankPartition;
using model::slice_label;
using model::Topology;
using model::WeightLocation;

// DeepSpeed's AutoEP (0.19.3+) under ZeRO-3, as the files record it: each rank's model file has
// ds_autoep_layers (its expert-parallel rank, the placement of every MoE layer's experts) and each optimizer
// file ds_zero_partition_groups (each sub-group's partition count, rank and ranks). Every rank holds its own
// experts under the same param names (a fused tensor whose first dimension is its local experts), and ZeRO-3
// partitions that expert sub-group over the expert-data-parallel group only. The catalog lists one
// GroupLayout per expert-parallel rank for it (GroupLayout::expert, ep_rank), its params named with the
// experts they hold.
struct AutoEpLayer {
  int id = 0;                 // moe_layer_id
  std::string module_path;    // "layers.0.mlp"
  std::string expert_prefix;  // expert_key_prefix: "layers.0.mlp.experts" (its params: prefix + ".w1", ...)
  int num_experts = 0;
  // Per expert-parallel rank: the global expert ids of its local experts, in their packed (row) order.
  std::vector<std::vector<int>> experts_of_rank;
};

// One expert param of one expert-parallel rank: a param of an expert GroupLayout.
struct AutoEpParam {
  std::string name;  // its name in the files and in the whole model, e.g. "layers.0.mlp.experts.w1"
  int layer = 0;     // index into AutoEp::layers
  int ep_rank = 0;
};

struct AutoEp {
  int ep_size = 1;   // expert-parallel size
  int edp_size = 1;  // expert-data-parallel size: the expert sub-groups' partition count (dp / ep_size)
  std::vector<AutoEpLayer> layers;
  std::vector<int> ep_rank_of_dp;  // per dp rank, from its model file
  // Catalog param name ("layers.0.mlp.experts.w1 [experts 0-1 on ep rank 0]") -> the param it is.
  std::map<std::string, AutoEpParam> params;
};

// "experts 0-1", "experts 0, 2, 5-7", "expert 3": global expert ids, runs collapsed.
std::string expert_list_text(const std::vector<int>& experts);

struct LossScalerInfo {
  bool present = false;
  bool dynamic = false;
  double cur_scale = 0;
  double min_scale = 0;
  int64_t cur_iter = 0;
  int64_t last_overflow_iter = -1;
};

// A DeepSpeed checkpoint's catalog: the neutral catalog (model/catalog.h) plus what only DeepSpeed's files
// record (their roles and names, ZeRO stage, optimizer wrapper, DeepSpeed version, loss scaler, universal and
// AutoEP layouts). The DeepSpeed family's readers fill it (rank files, universal folders, live snapshots and
// the weights sources); code that needs none of this takes a model::Catalog.
struct Catalog : model::Catalog {
  Catalog() {
    kind = "deepspeed";
    description = "DeepSpeed checkpoint";
  }
  int zero_stage = 0;
  OptimizerWrapper wrapper = OptimizerWrapper::Unknown;
  int optim_file_count = 0;          // optimizer files found for mp rank 0
  std::vector<int> partition_count;  // per group, from the optimizer files
  std::string ds_version;
  std::vector<CheckpointFile> files;
  LossScalerInfo loss_scaler;
  // Set when the folder is a universal checkpoint: then every trainable param is its own flat group with one
  // unpartitioned "rank" 0 (the tensors of zero/<param>/), dp_world_size is 0 and optim_file_count 1.
  std::optional<UniversalInfo> universal;
  // Set when an AutoEP ZeRO-3 checkpoint was laid out (catalog_autoep.cpp).
  std::optional<AutoEp> autoep;
  // Index in `files` of metadata_model_file(), set by the builder once the files' roles are final: it is
  // asked for once per param, and a universal folder lists 3-4 files per param. -1: found by searching the
  // files.
  int metadata_model_index = -1;

  // mp_rank -1: this catalog's own model-parallel rank.
  const CheckpointFile* model_file(int mp_rank = -1, int dp_rank = 0) const;
  const CheckpointFile* optim_file(int dp_rank, int mp_rank = -1) const;
  // The model file the catalog reads names, shapes and config from: its mp rank's (ZeRO-3: dp rank 0's, or
  // the lowest dp rank present when a node holds only its own ranks' files).
  const CheckpointFile* metadata_model_file() const;
};

}  // namespace ckptdoc::deepspeed
