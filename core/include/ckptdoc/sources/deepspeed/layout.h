#pragma once
// How DeepSpeed flattens and partitions a param group over dp ranks (deepspeed-format.md §5): ZeRO-1/2
// (§5.1, with its version-dependent alignment and padding bookkeeping), BF16_Optimizer (§5.2) and ZeRO-3
// (§5.3). Pure functions of the param list, dp and the DeepSpeed version; no file is read.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed {

// A parsed ds_version ("0.12.6+c00388a2e" -> 0.12.6).
struct DsVersion {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const DsVersion&) const = default;
};
std::optional<DsVersion> parse_ds_version(const std::string& text);

// Which value a ZeRO-1/2 rank records in `group_paddings` and how long its saved lean fp32 tensor is.
enum class PaddingRule : uint8_t {
  Exact,          // v0.16.4+: the padding inside each rank's partition
  LastRankTotal,  // v0.7.0-v0.16.3: the last rank records the whole alignment padding
  LastRankModDp,  // <= v0.6.7: the last rank records (dp - N % dp) % dp
};

struct Zero12Rules {
  int alignment_factor = 2;  // A = alignment_factor * dp (1 before v0.5.2)
  PaddingRule padding = PaddingRule::Exact;
  bool round_robin = false;  // v0.4.0-v0.4.3 always reordered params round-robin
  // Before v0.14.5 (PR #5681) param_slice_mappings of an MoE expert group were computed with the partition
  // size of the whole data-parallel group (flat numel / dp) instead of the expert-data-parallel one.
  bool expert_mappings_use_global_dp = false;
};
// Rules for a ds_version string; an empty string means "older than v0.4.0"; an unparsable one the newest.
Zero12Rules zero12_rules_for_version(const std::string& ds_version);

// Order of n params after DeepSpeed's _round_robin_reorder over dp buckets (indices into the input).
std::vector<size_t> round_robin_order(size_t n, int dp);

// `params` in flat-buffer order (name, shape, numel; offsets are filled in). dp >= 1.
GroupLayout layout_zero12(int index, std::vector<ParamEntry> params, int dp, const Zero12Rules& rules);
GroupLayout layout_bf16_optimizer(int index, std::vector<ParamEntry> params, int dp);
GroupLayout layout_zero3(int index, std::vector<ParamEntry> params, int dp);

// The fragment_address (numel, start) DeepSpeed's param_slice_mappings records for each param overlapping
// partition `part` (the index in group.partitions), in param order (§5.1 _create_param_mapping; valid when
// there is no round-robin).
struct SliceMapping {
  std::string name;
  int64_t numel = 0, start = 0;
};
std::vector<SliceMapping> expected_slice_mappings(const GroupLayout& group, int part);
// The same for an arbitrary window [lo, lo + size) of the flat group (start relative to lo): what DeepSpeed
// records for expert groups when Zero12Rules::expert_mappings_use_global_dp holds (lo = part * size, size =
// padded numel / the whole data-parallel size).
std::vector<SliceMapping> slice_mappings_in(const GroupLayout& group, int64_t lo, int64_t size);

}  // namespace ckptdoc::deepspeed
