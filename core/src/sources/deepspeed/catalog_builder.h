#pragma once
// Builds a Checkpoint's catalog: finds the tag folder, names every file's role, reads the model and
// optimizer pickles (no tensor bytes), derives stage/wrapper/world sizes, lays out every flat group and
// cross-checks the layout against what each rank saved. Damage becomes Problems; only an unusable
// checkpoint throws.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/layout.h"

namespace ckptdoc::deepspeed {

// What one rank's optimizer file says, collected once.
struct OptimRankScan {
  int dp_rank = 0;
  const TorchFile* file = nullptr;  // null when unreadable
  const Value* osd = nullptr;       // optimizer_state_dict
  std::optional<int64_t> zero_stage;
  bool has_single_partition = false, has_fp32_flat_groups = false, has_legacy_sub_partitions = false;
  std::vector<int64_t> fp32_numel;  // per flat group
  std::optional<std::vector<int64_t>> group_paddings;
  std::vector<int64_t> partition_count;
  std::vector<std::string>
      group_names;              // base optimizer param_groups[g]['name'] ("ep_size_2" for MoE groups)
  std::vector<bool> group_moe;  // param_groups[g]['moe']
  bool has_slice_mappings = false;
  std::vector<std::vector<SliceMapping>> slice_mappings;  // per group, in saved order
  std::string ds_version;
  // ZeRO-3 with AutoEP (0.19.3+): ds_zero_partition_groups, each sub-group's own partition count
  bool has_partition_groups = false;
  std::vector<int64_t> sub_group_partition_count;
};

// The catalog's file order: by role, then mp and dp rank as numbers, then name. Re-applied by every step that
// changes a file's role or ranks.
void sort_files(std::vector<CheckpointFile>& files);

enum class AutoEpOutcome : uint8_t { None, Read, Refused };

class CatalogBuilder {
 public:
  explicit CatalogBuilder(Checkpoint& ckpt) : ck_(ckpt), cat_(ckpt.catalog_) {}
  void build(const std::string& path, const OpenOptions& options);

 private:
  void list_files();
  void recognise_by_content();
  void identify_renamed_ranks();
  void report_renamed();
  const TorchFile* try_open(const CheckpointFile& f);
  // The same, not cached (Checkpoint::open_transient): for files too many to keep mapped.
  std::shared_ptr<const TorchFile> try_open_transient(const CheckpointFile& f);
  bool reported_empty(const CheckpointFile& f);  // a 0-byte file: reported as truncated
  void report_unreadable(const CheckpointFile& f, const std::exception& e);
  static std::vector<int> ranks_of(const CheckpointFile& f);
  void read_model_file();
  void index_metadata_model_file();  // once the files and their roles are final
  void read_topology();
  void recognise_sequence_parallel_names();  // DeepSpeed 0.18 Ulysses: optimizer files named by SP rank
  void label_problems();
  // MoE (catalog_experts.cpp): groups rebuilt from param_slice_mappings when the model file has no
  // param_shapes (DeepSpeed's MoE model files), expert groups listed once per expert-parallel rank.
  std::vector<std::vector<ParamEntry>> param_groups_from_slice_mappings();
  void expand_expert_groups();
  void check_experts();
  std::optional<std::vector<int64_t>> entry_shape(const std::string& name);
  // per_rank > 0: that many experts per expert-parallel rank instead of num_experts / ep_size.
  std::vector<std::string> expert_group_order(const std::set<int>& layers, int ep_size,
                                              const std::set<std::string>& suffixes, int per_rank);
  // Where each param's 16-bit weight is (model file `module`, pipeline layer file, expert file) and its shape
  // there (catalog_lp.cpp).
  void locate_lp_weights();
  void scan_optim_files();
  void decide_wrapper();
  void check_world_sizes();
  // AutoEP (catalog_autoep.cpp): when experts are partitioned apart from the dense params
  // (ds_zero_partition_groups) or differ per rank under one name (ds_autoep_layers), which no single-dp
  // layout reads, lays out the groups itself (Read) or refuses the layout with one problem saying why
  // (Refused); None: not such a checkpoint, build_groups lays it out.
  AutoEpOutcome autoep_layout();
  // The groups of a ZeRO-3 AutoEP checkpoint and Catalog::autoep; an empty string, or why they cannot be
  // read.
  std::string read_autoep_groups();
  // NVMe offload (catalog_nvme.cpp): a tag folder's offloaded_tensors/, which is not read, said so.
  void note_nvme_offload();
  void build_groups();
  void build_unfused_groups();  // FP16_UnfusedOptimizer's per-param masters (catalog_unfused.cpp)
  void build_fused_groups();    // FP16_Optimizer's flat masters, one per param group (catalog_fused.cpp)
  // The module's params as stage 0's unnamed masters are matched to them: its floating tensors that are not
  // buffers, names and shapes in saved order (catalog_unfused.cpp).
  void module_float_params(std::vector<std::string>& names, std::vector<std::vector<int64_t>>& shapes) const;
  void check_partitions();
  void check_module_shapes();
  void read_optimizer_summary(const Value* osd = nullptr);  // default: the first readable optimizer file's
  void note_optimizer_not_saved();  // trained with an optimizer, saved none (catalog_optimizer_not_saved.cpp)
  void note_model_files_not_saved();  // ZeRO-3: rank 0's model file alone (#7546,
                                      // catalog_model_files_not_saved.cpp)
  // Universal checkpoints (catalog_universal.cpp): the whole catalog of a folder holding zero/.
  void build_universal();
  void note_universal_beside();  // a save folder whose `latest_universal` names another tag
  void read_optimizer_groups(const Value* inner);
  void check_pickle_safety();
  // The code's severity from the table (model/finding_codes.h), or the one a site gives and says why.
  void problem(model::Code code, std::string message, std::string file = {}, std::vector<int> ranks = {},
               std::vector<std::string> params = {});
  void problem(model::Code code, model::Severity severity, std::string message, std::string file = {},
               std::vector<int> ranks = {}, std::vector<std::string> params = {});
  std::vector<std::vector<ParamEntry>> param_groups_from_shapes();

  Checkpoint& ck_;
  Catalog& cat_;
  const TorchFile* model_ = nullptr;    // primary model file (mp 0, dp 0)
  std::map<int, OptimRankScan> optim_;  // by dp rank, mp rank 0, readable or not
  // Files whose names do not say what they are, recognised by content: path -> how their rank was told.
  std::map<std::string, std::string> renamed_;
  const Value* old_param_shapes_ = nullptr;  // param_shapes from an optim file (< v0.6.0)
  std::string old_param_shapes_file_;
  int layout_dp_ = 0;
  bool autoep_refused_ = false;
  std::vector<Problem> job_problems_;  // about the whole job, not this model-parallel rank (not labelled)
};

}  // namespace ckptdoc::deepspeed
