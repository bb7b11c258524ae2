#pragma once
// Megatron-core's fp32 main params against the bf16/fp16 weights they should round to, in the model-space
// optimizer layouts (docs/reference.md "Megatron-core folders"):
//   optimizer.state.fp32_param.<key>  Float16OptimizerWithFloat16Params; DistributedOptimizer
//                                     fully_sharded_model_space / dp_zero_gather_scatter
//   optimizer.state.param.<key>       DistributedOptimizer fully_reshardable
// each with the global shape of the model's <key>. The two may be chunked differently: each main chunk is
// compared with the same box of the weight, assembled from the weight's chunks.
// In bucket space (optimizer.distributed.*, dp_reshardable) each param's slice of its `param` bucket is found
// with bucket_map.h and compared with its box of the weight; the 64-alignment gaps are never read.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/rules.h"
#include "bucket_map.h"
#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::megatron {

struct MainParamComparison {
  std::vector<analysis::ParamReport> params;  // one per (main, weight) pair compared; name = the model key
  // "optimizer.state.fp32_param.", "optimizer.state.param." or "optimizer.distributed." (bucket space)
  std::string prefix;
  DType lp_dtype = DType::BF16;
  std::vector<std::string> not_compared;  // "<key>: why" (a chunk unreadable, a shape that differs)
  bool bucket_space = false;              // optimizer.distributed.* (dp_reshardable)
  // Bucket space: a param's name -> the bucket key holding its main and where ("<key> [start, end)").
  std::map<std::string, std::string> key_of, slice_of;
  size_t bucket_params = 0;  // bucket space: the params the map placed (compared or not)
                             // The storage files holding the main chunks written by each rank (the rank of
                             // `__<rank>_<n>.distcp`).
  std::map<int, std::vector<std::string>> files_by_rank;
  // Bucket space: the map the comparison used (its pointers are into the checkpoint's metadata), for the
  // other checks of the slices (bucket_checks.h); null when the map could not be made.
  std::shared_ptr<const BucketMap> map;
  // Bucket space: why the map refused the save or some of its dp groups (BucketMap::refused, or the error
  // that stopped it); empty when every group was mapped.
  std::vector<std::string> map_refused;
};

// How the comparison names a bucket-space param: its map name, with "(dp_group_idx_<i>)" (or
// "(chained_<c>.dp_group_idx_<i>)") when the save has several groups (or some were refused).
std::string bucket_param_name(const BucketMap& map, const BucketGroup& g, const BucketSlot& slot);

// One main beside its weight: same global shape, chunks tiling it, the weight bf16 or fp16.
struct MainPair {
  const dcp::Entry* main = nullptr;
  const dcp::Entry* weight = nullptr;
  std::string key;     // the model key
  std::string prefix;  // the main's key is prefix + key
  DType lp = DType::BF16;
};
// The pairs of `md`; what cannot be paired (another shape, chunks that do not tile) goes to `not_compared`.
std::vector<MainPair> main_pairs(const dcp::Metadata& md, std::vector<std::string>& not_compared);
// The weight whole, row-major, in its own dtype (read chunk by chunk).
std::vector<uint8_t> read_weight(const dcp::Checkpoint& ckpt, const MainPair& pair);
// The box of `chunk` (a chunk of the main) cut from the whole weight, row-major.
std::vector<uint8_t> weight_box(const std::vector<uint8_t>& weight, const MainPair& pair,
                                const dcp::Chunk& chunk);
// The weight's elements that the main's `chunk` holds, in its order: the chunk's box (weight_box), or for a
// main saved nd-flattened (megatron-core <= 0.15, dcp::Entry::nd_flattened_from) the elements [s, s + n) of
// one fragment's box, row-major, that the chunk's last axis says.
std::vector<uint8_t> weight_of_main_chunk(const std::vector<uint8_t>& weight, const MainPair& pair,
                                          const dcp::Chunk& chunk);

// Every main param whose weight is bf16 or fp16, compared element by element with the exact-rounding rule of
// DeepSpeed's masters (Backend::divergence); the largest weight is held whole once, row-major. With
// `progress`, its current stage counts the params compared (its total the pairs found) and a cancel stops
// the comparison between params.
MainParamComparison compare_main_params(const dcp::Checkpoint& ckpt, Progress* progress = nullptr);

// The fp32-master-mismatch / fp32-master-drift findings of analysis::master_findings, in Megatron's words.
std::vector<analysis::Finding> main_param_findings(const MainParamComparison& c);

}  // namespace ckptdoc::megatron
