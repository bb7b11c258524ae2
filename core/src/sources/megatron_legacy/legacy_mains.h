#pragma once
// The fp32 mains of a legacy Megatron save (optimizer.fp32_from_fp16_params[g][i] in model_optim_rng.pt)
// against the bf16/fp16 weights they should round to. The pickle holds the mains by position only; which
// param is main [g][i] follows megatron-core's _get_param_groups (optimizer/__init__.py, 0.18.0: the params
// in named_parameters order, grouped by their override key, groups sorted with the default group first; the
// standard override is wd_mult 0.0 for "*.bias" and 1-D params) and Float16OptimizerWithFloat16Params keeping
// only the 16-bit params of each group in fp32_from_float16_groups (optimizer.py). A group whose overrides
// ckptdoc does not know, or any count or shape that disagrees, leaves the rank's mains unmapped (said why):
// nothing is compared on a guess. docs/megatron-legacy-format.md.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/rules.h"
#include "ckptdoc/analysis/report.h"
#include "legacy_distopt.h"
#include "legacy_folder.h"
#include "legacy_rank.h"

namespace ckptdoc::megatron_legacy {

struct MainSlot {
  size_t group = 0, index = 0;  // fp32_from_fp16_params[group][index]
  size_t model = 0;             // the weight: RankContent::model[model]
};

// The slots of one rank's mains, or why they cannot be placed (nullopt and `why` set). With `members`, each
// param group's params (indices into RankContent::model, in group order) when the slots are found.
std::optional<std::vector<MainSlot>> map_mains(const RankContent& rank, std::string& why,
                                               std::vector<std::vector<size_t>>* members = nullptr);

// One main compared: where it sits and how many of its elements round exactly to the weight.
struct MainRecord {
  size_t rank = 0, group = 0,
         index = 0;     // fp32_from_fp16_params[group][index]; distrib_optim.pt: 0, k-th placed
  int64_t offset = -1;  // distrib_optim.pt: the main's start in the coalesced "param" state
  std::string name;
  uint64_t exact = 0, count = 0;
};

struct LegacyMainComparison {
  std::vector<MainRecord> records;  // rank by rank, in fp32_from_fp16_params order
  // One per param name, every tensor rank's main of it merged; with pipeline stages or expert ranks the name
  // is qualified "pp<s>[ep<e>]:<name>" (each stage numbers its layers from 0).
  std::vector<analysis::ParamReport> params;
  DType lp_dtype = DType::BF16;
  size_t mains_compared = 0;              // (rank, param) pairs
  std::vector<std::string> not_compared;  // "<rank file>: why"
  std::vector<std::string> files;         // rank index -> the file holding its mains (per_rank keys index it)
  bool distrib_optim = false;             // some mains were distrib_optim.pt's
};

// Every readable rank's mains compared element by element with its weights (Backend::divergence's exact
// rounding rule, as the torch_dist comparison in sources/megatron/main_params.cpp).
// A rank without fp32_from_fp16_params whose distrib_optim.pt was read (`distopts[r]`, null when none) has
// that file's mains compared instead.
LegacyMainComparison compare_mains(const LegacyFolder& folder, const std::vector<RankContent>& ranks,
                                   const std::vector<const DistOptState*>& distopts = {});

// fp32-master-mismatch / fp32-master-drift in the torch_dist source's words, the masters named as
// optimizer.fp32_from_fp16_params.
std::vector<analysis::Finding> legacy_main_findings(const LegacyMainComparison& c);

}  // namespace ckptdoc::megatron_legacy
