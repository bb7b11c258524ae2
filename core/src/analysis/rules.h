#pragma once
// The finding rules: from the catalog's problems and the scanned statistics to named findings.
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/model/catalog.h"

namespace ckptdoc::analysis {

// Thresholds that separate rounding, drift and a stale master (documented in README's diagnosis section).
struct MismatchThresholds {
  double healthy_exact_fraction = 0.999;  // at or above: lp is the rounding of fp32, as DeepSpeed keeps it
  double stale_far_fraction = 0.01;       // share of elements >= 256 lp ULPs apart that means "unrelated"
  double stale_rel_l2 = 0.05;             // or a relative L2 distance this large
  double stale_exact_fraction = 0.5;      // or fewer exact matches than this: DeepSpeed copies lp from fp32
                                          // after every step, so even tiny values (LayerNorm near 1.0) match
};

// Which rules run: a scan that read no moments (DiagnoseOptions::masters_only) must not be judged by the
// optimizer rules, which would read the absent moments as an empty optimizer state.
enum class RuleSet { All, MastersOnly };

// The catalog's problems, the scan's, and the findings of the rules on values and of the catalog's own
// source_rules (model/source_rules.h), errors first.
std::vector<Finding> apply_rules(const model::Catalog& catalog, const std::vector<ParamReport>& params,
                                 const std::vector<Finding>& scan_problems, RuleSet rules = RuleSet::All,
                                 const MismatchThresholds& thresholds = {});

// What names a framework's fp32 masters in the master-vs-weight findings.
struct MasterContext {
  DType lp_dtype = DType::BF16;
  std::string masters;  // "fp32 master weights" (DeepSpeed), "fp32 main params" (Megatron)
  std::string cause;    // how masters are left at their initial values in that framework
  std::string fix;      // the command that refreshes them
  std::function<std::vector<std::string>(const std::set<int>&)> files_of;  // the files of those ranks
};

// The fp32-master-mismatch (error: stale masters, DeepSpeed #762) and fp32-master-drift (warning: a few ULPs)
// findings from each param's lp_vs_fp32 and per_rank divergence: the one rule every framework's comparison
// uses.
void master_findings(const std::vector<ParamReport>& params, const MasterContext& ctx,
                     const MismatchThresholds& th, std::vector<Finding>& out);

// fp16 masters whose float32 Adam moments a resume would cast to float16, flushing the smallest exp_avg_sq
// values to 0 (rule_moments_cast.cpp). Runs after the scan's masters-in-16-bit note is in `out`.
// The words that name the framework are the catalog's source's (SourceRules::optimizer_state_words).
void moments_cast_rules(const model::Catalog& cat, const std::vector<ParamReport>& params,
                        std::vector<Finding>& out);

// The lp dtype as findings name it: "fp16", "bf16" (else the dtype's own name).
std::string lp_name(DType t);

// Share of elements whose lp is at least 256 ULPs from round(fp32) (buckets 9 and up).
double far_fraction(const DivergenceStats& d);

}  // namespace ckptdoc::analysis
