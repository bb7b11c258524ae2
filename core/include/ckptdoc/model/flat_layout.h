#pragma once
// The flat-partition layout every source with flat optimizer groups reports through: which elements of which
// param sit where in each rank's partition of a group. Source-neutral: a DeepSpeed reader
// (sources/deepspeed/catalog.h) fills it today; analysis, repair, session and the views read it without
// knowing the source.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckptdoc::model {

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
  // What the writing framework's version records as this rank's padding (DeepSpeed: `group_paddings`,
  // deepspeed-format.md §5.1/§5.2); only the DeepSpeed reader sets it.
  int64_t recorded_padding = 0;
  std::vector<Fragment> fragments;
};

struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t offset = 0;  // ZeRO-1/2/BF16: offset in the group's flat buffer. ZeRO-3: offset in each rank's
                       // sub-group partition (sum of ceil(numel/dp) of the params before it)
};

// Where a trainable param's 16-bit weight is stored (DeepSpeed: the model file's `module`, a pipeline layer
// file or an MoE expert file), under `key` in that file's state dict.
struct WeightLocation {
  std::string file;  // relative to the checkpoint's tag folder
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

// The wrapped torch optimizer's state of one flat group (ZeRO-1/2/BF16: a param group; ZeRO-3: a sub-group),
// as rank 0's optimizer state saved it.
struct OptimizerGroupState {
  std::optional<int64_t> step;        // Adam's own step count; absent when the state holds none
  double beta1 = 0.9, beta2 = 0.999;  // from the param group's `betas` (torch's defaults when absent)
  bool has_state = false;             // a state entry exists for the group
};

}  // namespace ckptdoc::model
