#pragma once
// What a checkpoint holds, in terms no source owns: where it is, how the job was parallelised, the dtypes,
// the flat groups with their partition layout, the frozen params and buffers, the counters and optimizer
// state saved beside them, and every problem met while reading. A source's reader fills it (the DeepSpeed
// family: deepspeed::Catalog, which adds what only DeepSpeed's files record); analysis, repair, session and
// the views read this part of it without knowing the source.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/dtype.h"
#include "ckptdoc/model/finding.h"
#include "ckptdoc/model/flat_layout.h"
#include "ckptdoc/model/source_rules.h"
#include "ckptdoc/model/topology.h"

namespace ckptdoc::model {

// A fact only some sources record, in the source's words, for the front ends to print as it is:
// ("DeepSpeed", "0.19.8"). Nothing decides on a fact; what code decides on is a field or capability.
struct Fact {
  std::string label;
  std::string value;
};

// What one model-parallel rank (pipeline stage x tensor rank) of a checkpoint holds: a data-parallel job has
// one; a tensor/pipeline-parallel job has one per mp rank, each with its own groups, params and layout, and
// the topology of the whole job.
struct Catalog {
  // Which reader made it ("deepspeed", "hf-folder", "weights-file", ...). Data for inspect and diagnose to
  // print; code asks the capabilities below, set by the source, never this.
  std::string kind;
  // What the source is, in words: "DeepSpeed checkpoint", "Hugging Face folder", "weights file".
  std::string description;
  // Tensors only, by design: no fp32 masters, no optimizer state, nothing to repair (a weights source).
  bool weights_only = false;
  bool single_file = false;  // one file, not a folder (a weights file)
  // Convert (to DeepSpeed's universal layout) reads it: rank files, not a universal folder already.
  bool convertible = false;
  // Its trainable params' 16-bit weights are not saved with it (DeepSpeed ZeRO-3 saves placeholders): the
  // masters can be compared with a copy from elsewhere (Analysis > Compare with 16-bit weights).
  bool lp_weights_elsewhere = false;
  // The files record an optimizer (a wrapper holding masters or moments, or a plain torch optimizer), whether
  // or not its state was laid out in flat groups.
  bool has_optimizer = false;
  // A training checkpoint that saves its module's weights in a file of their own (DeepSpeed's model states
  // file): without flat groups, those weights are what a diagnosis reads. Not a weights source (its tensors
  // are the weights) nor a folder of per-param state (a universal checkpoint).
  bool module_weights_file = false;
  // It loads at any data-parallel size (DeepSpeed's universal checkpoint): dp_world_size is the job's that
  // wrote it, not one it must resume at.
  bool dp_independent = false;
  // 16-bit weights saved elsewhere can be compared with its masters (diagnose --lp-source): implies
  // lp_weights_elsewhere, false where the masters cannot be matched to whole weights yet (DeepSpeed AutoEP).
  bool compares_lp_source = false;
  // The version of the software that wrote it, as the files record it ("0.19.8": DeepSpeed's ds_version),
  // "" when they record none: what convert writes for unless told another.
  std::string writer_version;
  std::string save_dir;  // folder holding `latest` (or the tag folder's parent)
  std::string tag;
  std::string tag_dir;  // absolute
  int mp_rank = 0;      // the model-parallel rank these groups, params and layout belong to
  int pp_stage = 0, tp_rank = 0;
  Topology topology;
  DType lp_dtype = DType::F32;
  int dp_world_size = 0;  // from the model file
  int mp_world_size = 0;
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
  std::string lr_scheduler_summary;
  std::vector<Finding> problems;  // what is missing or odd, found while cataloguing

  // What the front ends print of the source, in its own words, set by its reader: how the optimizer state is
  // held ("DeepSpeedZeroOptimizer, ZeRO stage 2 (AdamW)", "none"), how a flat group is split over the
  // data-parallel ranks ("ZeRO stage 2"), the files read and their bytes, and the facts printed after them,
  // in order. An empty text is not printed.
  std::string optimizer_text;
  std::string partitioning_text;
  // The class holding the optimizer state alone, as the source names it ("DeepSpeedZeroOptimizer", "none").
  std::string optimizer_class;
  size_t file_count = 0;
  uint64_t file_bytes = 0;
  std::vector<Fact> facts;
  // How far the job sharded its training state, in ZeRO's stages (1: optimizer state, 2: and gradients, 3:
  // and weights); 0: not sharded, or not recorded. diagnose --json prints it as "zero_stage".
  int sharding_stage = 0;
  // The rules only its source can judge (source_rules.h), set by its reader; null: none.
  std::shared_ptr<const SourceRules> source_rules;

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

}  // namespace ckptdoc::model
