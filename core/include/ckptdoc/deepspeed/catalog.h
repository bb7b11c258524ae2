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
#include "ckptdoc/model/finding.h"

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

// One contiguous run of a param's elements inside one rank's flat partition.
struct Fragment {
  int param = 0;                 // index into GroupLayout::params
  int64_t param_offset = 0;      // first element of the param covered
  int64_t partition_offset = 0;  // where it sits in the rank's partition
  int64_t numel = 0;
};

struct RankPartition {
  int rank = 0;
  int64_t saved_numel =
      0;                // length of the fp32 tensor saved for this rank (lean for ZeRO-1/2, padded for BF16)
  int64_t padding = 0;  // padding elements inside this rank's partition (partition_numel - real_numel)
  int64_t real_numel = 0;  // param elements inside this rank's partition
  int64_t recorded_padding =
      0;  // what DeepSpeed's version writes in `group_paddings` for this rank (§5.1/§5.2)
  std::vector<Fragment> fragments;
};

struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t offset = 0;  // ZeRO-1/2/BF16: offset in the group's flat buffer. ZeRO-3: offset in each rank's
                       // sub-group partition (sum of ceil(numel/dp) of the params before it)
};

// Where a trainable param's 16-bit weight is stored: the model file's `module`, a pipeline layer file or an
// MoE expert file, under `key` in that file's state dict.
struct WeightLocation {
  std::string file;  // relative to the tag folder
  std::string key;
};

// A flat group: an optimizer param group (ZeRO-1/2, BF16) or a ZeRO-3 sub-group. An MoE expert group is
// partitioned over the expert-data-parallel ranks and holds other experts on each expert-parallel rank: the
// catalog lists one GroupLayout per expert-parallel rank, with its params under their global expert names.
struct GroupLayout {
  int index = 0;                // position in Catalog::groups
  int file_group = 0;           // position of the group in the rank files' lists (== index without MoE)
  int ep_rank = -1;             // expert groups: the expert-parallel rank whose experts these are
  bool expert = false;          // an MoE expert group ('moe': True in its param group)
  int64_t numel = 0;            // sum of param numels
  int64_t padded_numel = 0;     // dp * partition_numel
  int64_t partition_numel = 0;  // P: per-rank partition length
  std::vector<ParamEntry> params;
  // One per partition, in partition order; RankPartition::rank is the dp rank whose optimizer file holds it
  // (partition k of expert-parallel rank e: dp rank e + k * ep, DeepSpeed's default expert grouping).
  std::vector<RankPartition> partitions;
  // The partition a dp rank's file holds (nullptr when that rank holds none of this group).
  const RankPartition* partition_of(int dp_rank) const;
  int partition_index(int dp_rank) const;  // -1 when none
};

// A problem the catalog (or a weights source) finds while reading the files: the one finding type.
using Problem = model::Finding;

// One MoE layer (deepspeed.moe.layer.MoE) as its expert files and the model file's num_experts say.
struct MoeLayer {
  int id = 0;           // the layer id in expert file names (index among the model's MoE modules)
  std::string prefix;   // module path of its experts, e.g. "moe.deepspeed_moe.experts.deepspeed_experts."
  int num_experts = 0;  // from the model file's num_experts
  int ep_size = 1;      // expert-parallel size of its expert group
};

// How the job was parallelised (deepspeed-format.md §8). mp rank = pipeline stage * tp + tensor rank.
struct Topology {
  int mp_world_size = 1;
  int pp = 1, tp = 1;     // pipeline stages, tensor-parallel ranks
  bool pipeline = false;  // PipelineModule: `module` is None, weights live in layer_XX[-model_YY] files
  bool layer_files_named_by_tp = false;  // layer_XX-model_YY-model_states.pt (else layer_XX-model_states.pt)
  std::vector<MoeLayer> moe_layers;
  int ep = 1;                        // largest expert-parallel size (1 without MoE)
  bool legacy_expert_files = false;  // expert_E_mp_rank_XX_model_states.pt (before 2021-10)
  std::map<int, int>
      layer_stage;  // pipeline layer index -> stage that owns it (from each stage's param names)
  int stage_of(int mp_rank) const { return tp > 0 ? mp_rank / tp : 0; }
  int tp_of(int mp_rank) const { return tp > 0 ? mp_rank % tp : 0; }
  bool model_parallel() const { return mp_world_size > 1; }
  bool moe() const { return !moe_layers.empty(); }
};

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

// The wrapped torch optimizer's state of one flat group (ZeRO-1/2/BF16: a param group; ZeRO-3: a sub-group),
// as rank 0's optimizer file (or the model file's `optimizer`) saved it.
struct OptimizerGroupState {
  std::optional<int64_t> step;        // Adam's own step count; absent when the state holds none
  double beta1 = 0.9, beta2 = 0.999;  // from the param group's `betas` (torch's defaults when absent)
  bool has_state = false;             // a state entry exists for the group
};

// What one model-parallel rank (pipeline stage x tensor rank) of a checkpoint holds: a data-parallel job has
// one; a tensor/pipeline-parallel job has one per mp rank (Checkpoint::slice), each with its own groups,
// params and layout, and the files and topology of the whole job.
struct Catalog {
  // "deepspeed", or for a weights-only source (weights/weights_source.h): "hf-folder" | "weights-file". Data
  // for inspect and diagnose to print; code asks the capabilities below, set by the source, never this.
  std::string kind = "deepspeed";
  // What the source is, in words: "DeepSpeed checkpoint", "Hugging Face folder", "weights file".
  std::string description = "DeepSpeed checkpoint";
  // Tensors only, by design: no fp32 masters, no optimizer state, nothing to repair (a weights source).
  bool weights_only = false;
  bool single_file = false;  // one file, not a folder (a weights file)
  std::string save_dir;      // folder holding `latest` (or the tag folder's parent)
  std::string tag;
  std::string tag_dir;  // absolute
  int mp_rank = 0;      // the model-parallel rank these groups, params and layout belong to
  int pp_stage = 0, tp_rank = 0;
  Topology topology;
  int zero_stage = 0;
  DType lp_dtype = DType::F32;
  OptimizerWrapper wrapper = OptimizerWrapper::Unknown;
  int dp_world_size = 0;  // from the model file
  int mp_world_size = 0;
  int optim_file_count = 0;          // optimizer files found for mp rank 0
  std::vector<int> partition_count;  // per group, from the optimizer files
  std::string ds_version;
  std::vector<CheckpointFile> files;
  std::vector<GroupLayout> groups;
  std::vector<std::string> buffer_names;
  std::vector<ParamEntry> frozen_params;                                    // name + shape
  std::map<std::string, std::string> shared_params;                         // alias -> owner
  std::vector<std::pair<std::string, std::string>> shared_params_in_order;  // (alias, owner) as saved
  std::vector<std::string> module_keys;                // module state-dict keys in file order
  std::map<std::string, WeightLocation> lp_locations;  // trainable param -> where its 16-bit weight is
  int64_t global_steps = 0, skipped_steps = 0, global_samples = 0;
  std::optional<int64_t> optimizer_step;              // Adam step of group 0, rank 0
  std::vector<OptimizerGroupState> optimizer_groups;  // per flat group (index = GroupLayout::index)
  std::vector<std::string> optimizer_state_keys;      // e.g. exp_avg, exp_avg_sq
  // Per flat group: the tensor state keys (exp_avg, ...) any rank holds; every rank must hold them all.
  std::vector<std::vector<std::string>> group_state_keys;
  std::string optimizer_name_hint;  // from ds_config when present, e.g. "AdamW"
  LossScalerInfo loss_scaler;
  std::string lr_scheduler_summary;
  std::vector<Problem> problems;  // what is missing or odd, found while cataloguing
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
  // Group and index of a trainable param by name; nullopt when not trainable/unknown.
  std::optional<std::pair<int, int>> find_param(const std::string& name) const;
  int64_t trainable_numel() const;
  // Number of flat groups in each rank file (expert groups count once however many ep ranks there are).
  int file_group_count() const;
  // The group a dp rank's file holds at position `file_group` (the expert-parallel instance for expert
  // groups).
  const GroupLayout* group_in_file(int file_group, int dp_rank) const;
  // "pp 1, tp 0" for a tensor/pipeline-parallel job, "" for a data-parallel one.
  std::string slice_label() const;
};

// "pp S, tp T" (only the parts that are parallel: "tp 1" without pipeline, "pp 2" without tensor
// parallelism).
std::string slice_label(const Topology& t, int pp, int tp);

}  // namespace ckptdoc::deepspeed
