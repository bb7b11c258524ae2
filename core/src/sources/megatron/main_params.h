#pragma once
// Megatron-core's fp32 main params against the bf16/fp16 weights they should round to, in the model-space
// optimizer layouts (docs/reference.md "Megatron-core folders"):
//   optimizer.state.fp32_param.<key>  Float16OptimizerWithFloat16Params; DistributedOptimizer
//                                     fully_sharded_model_space / dp_zero_gather_scatter
//   optimizer.state.param.<key>       DistributedOptimizer fully_reshardable
// each with the global shape of the model's <key>. The two may be chunked differently: each main chunk is
// compared with the same box of the weight, assembled from the weight's chunks.
#include <map>
#include <string>
#include <vector>

#include "analysis/rules.h"
#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/dcp/checkpoint.h"

namespace ckptdoc::megatron {

struct MainParamComparison {
  std::vector<analysis::ParamReport> params;  // one per (main, weight) pair compared; name = the model key
  std::string prefix;                         // "optimizer.state.fp32_param." or "optimizer.state.param."
  DType lp_dtype = DType::BF16;
  std::vector<std::string> not_compared;  // "<key>: why" (a chunk unreadable, a shape that differs)
  bool bucket_space = false;              // optimizer.distributed.* (dp_reshardable): not comparable here
  // The storage files holding the main chunks written by each rank (the rank of `__<rank>_<n>.distcp`).
  std::map<int, std::vector<std::string>> files_by_rank;
};

// Every main param whose weight is bf16 or fp16, compared element by element with the exact-rounding rule of
// DeepSpeed's masters (Backend::divergence); the largest weight is held whole once, row-major.
MainParamComparison compare_main_params(const dcp::Checkpoint& ckpt);

// The fp32-master-mismatch / fp32-master-drift findings of analysis::master_findings, in Megatron's words.
std::vector<analysis::Finding> main_param_findings(const MainParamComparison& c);

}  // namespace ckptdoc::megatron
