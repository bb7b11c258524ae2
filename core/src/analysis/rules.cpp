#include "rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace ckptdoc::analysis {
namespace {

std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g%%", f * 100.0);
  return b;
}
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

Severity severity_of(const std::string& s) {
  if (s == "error") return Severity::Error;
  if (s == "warning") return Severity::Warning;
  return Severity::Info;
}

std::string lp_name(DType t) { return t == DType::BF16 ? "bf16" : t == DType::F16 ? "fp16" : std::string(dtype_name(t)); }

std::string list_names(const std::vector<std::string>& names, size_t max = 6) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max) s += ", … (" + std::to_string(names.size() - max) + " more)";
  return s;
}

bool is_mixed_precision(const deepspeed::Catalog& c) { return c.lp_dtype == DType::F16 || c.lp_dtype == DType::BF16; }

void master_rules(const deepspeed::Catalog& cat, const std::vector<ParamReport>& params, const MismatchThresholds& th,
                  std::vector<Finding>& out) {
  if (!is_mixed_precision(cat)) return;
  Finding stale{"fp32-master-mismatch", Severity::Error, "", {}, {}, {}, RepairKind::RefreshFp32};
  Finding drift{"fp32-master-drift", Severity::Warning, "", {}, {}, {}, RepairKind::RefreshFp32};
  std::set<int> stale_ranks, drift_ranks;
  DivergenceStats stale_total, drift_total;
  double worst_rel = 0;
  size_t compared = 0;
  for (const auto& p : params) {
    if (!p.lp_vs_fp32 || p.lp_vs_fp32->count == 0) continue;
    ++compared;
    const auto& d = *p.lp_vs_fp32;
    if (d.exact_fraction() >= th.healthy_exact_fraction) continue;
    const bool is_stale = far_fraction(d) > th.stale_far_fraction || d.rel_l2() > th.stale_rel_l2 ||
                          d.exact_fraction() < th.stale_exact_fraction;
    (is_stale ? stale : drift).params.push_back(p.name);
    (is_stale ? stale_total : drift_total).merge(d);
    if (is_stale) worst_rel = std::max(worst_rel, std::isfinite(d.rel_l2()) ? d.rel_l2() : 1e30);
    for (const auto& [rank, rd] : p.per_rank)
      if (rd.count > 0 && rd.exact_fraction() < th.healthy_exact_fraction) (is_stale ? stale_ranks : drift_ranks).insert(rank);
  }
  const std::string lp = lp_name(cat.lp_dtype);
  if (!stale.params.empty()) {
    stale.ranks.assign(stale_ranks.begin(), stale_ranks.end());
    stale.evidence = {{"params_affected", double(stale.params.size())},
                      {"params_compared", double(compared)},
                      {"exact_fraction", stale_total.exact_fraction()},
                      {"far_fraction", far_fraction(stale_total)},
                      {"rel_l2", stale_total.rel_l2()},
                      {"worst_rel_l2", worst_rel},
                      {"max_abs", stale_total.max_abs},
                      {"mean_abs", stale_total.mean_abs()}};
    stale.message = "The fp32 master weights of " + std::to_string(stale.params.size()) + " of " +
                    std::to_string(compared) + " trainable params do not match their " + lp +
                    " weights: only " + pct(stale_total.exact_fraction()) + " of elements equal the " + lp +
                    " rounding of the master (a healthy checkpoint is ~100%), relative L2 distance " +
                    num(stale_total.rel_l2()) + ". This is the signature of masters left at their initial values "
                    "(e.g. after load_checkpoint(..., load_optimizer_states=False) before v0.13): the next optimizer "
                    "step would overwrite the trained weights with them. Fix: refresh the fp32 masters from the " +
                    lp + " weights (ckptdoc repair --refresh-fp32). Affected: " + list_names(stale.params) + ".";
    out.push_back(std::move(stale));
  }
  if (!drift.params.empty()) {
    drift.ranks.assign(drift_ranks.begin(), drift_ranks.end());
    drift.evidence = {{"params_affected", double(drift.params.size())},
                      {"exact_fraction", drift_total.exact_fraction()},
                      {"rel_l2", drift_total.rel_l2()},
                      {"max_abs", drift_total.max_abs}};
    drift.message = std::to_string(drift.params.size()) + " params have fp32 masters that differ from their " + lp +
                    " weights by a few ULPs beyond rounding (" + pct(drift_total.exact_fraction()) +
                    " exact, relative L2 " + num(drift_total.rel_l2()) +
                    "): the weights and masters were saved at slightly different moments. Usually harmless; refresh "
                    "the masters if the " + lp + " weights are the ones you trust. Affected: " +
                    list_names(drift.params) + ".";
    out.push_back(std::move(drift));
  }
}

void nonfinite_rules(const std::vector<ParamReport>& params, std::vector<Finding>& out) {
  for (const char* kind : {"lp", "fp32", "exp_avg", "exp_avg_sq"}) {
    Finding f{"nonfinite-values", Severity::Error, "", {}, {}, {}, RepairKind::None};
    std::set<int> ranks;
    uint64_t total = 0;
    for (const auto& p : params) {
      auto it = p.nonfinite_by_rank.find(kind);
      if (it == p.nonfinite_by_rank.end()) continue;
      f.params.push_back(p.name);
      for (const auto& [r, n] : it->second) {
        ranks.insert(r);
        total += n;
      }
    }
    if (f.params.empty()) continue;
    f.ranks.assign(ranks.begin(), ranks.end());
    const std::string k = kind;
    const bool moment = k.starts_with("exp_avg");
    f.repair = moment ? RepairKind::ResetOptimizer : (k == "fp32" ? RepairKind::RefreshFp32 : RepairKind::None);
    std::string rank_list;
    for (int r : f.ranks) rank_list += (rank_list.empty() ? "" : ", ") + std::to_string(r);
    f.evidence = {{"count", double(total)}, {"params_affected", double(f.params.size())}};
    f.message = std::to_string(total) + " NaN/Inf values in " + (k == "lp" ? "the module weights" : k == "fp32" ? "the fp32 master weights" : "the optimizer's " + k) +
                " on rank" + (f.ranks.size() > 1 ? "s " : " ") + rank_list + " (" + list_names(f.params) + "). " +
                (moment ? "Training would propagate them into the weights at the next step. Fix: reset the optimizer "
                          "state (ckptdoc repair --reset-optimizer), or go back to an earlier checkpoint."
                        : k == "fp32" ? "Fix: refresh the masters from the weights if those are finite (ckptdoc repair --refresh-fp32)."
                                      : "The weights themselves are broken; go back to an earlier checkpoint.");
    out.push_back(std::move(f));
  }
}

void optimizer_rules(const deepspeed::Catalog& cat, const std::vector<ParamReport>& params, std::vector<Finding>& out) {
  const bool zero_like = cat.zero_stage > 0 || cat.wrapper == deepspeed::OptimizerWrapper::BF16Optimizer;
  if (zero_like && cat.optim_file_count == 0) {
    out.push_back({"optimizer-state-missing", Severity::Warning,
                   "No optimizer files: this is a weights-only checkpoint. DeepSpeed loads it only with "
                   "load_optimizer_states=False (or load_module_only=True); v0.13+ then refreshes the fp32 masters from "
                   "the weights, older versions keep stale masters (DeepSpeed PR #762).",
                   {}, {}, {}, RepairKind::None});
    return;
  }
  if (cat.optim_file_count == 0 && cat.wrapper != deepspeed::OptimizerWrapper::FP16Optimizer &&
      cat.wrapper != deepspeed::OptimizerWrapper::TorchOptimizer)
    return;
  size_t with_state = 0, with_moments = 0;
  Finding zeroed{"optimizer-step-inconsistent", Severity::Error, "", {}, {}, {}, RepairKind::ResetOptimizer};
  Finding negative{"optimizer-step-inconsistent", Severity::Error, "", {}, {}, {}, RepairKind::ResetOptimizer};
  Finding fresh_moments{"optimizer-step-inconsistent", Severity::Warning, "", {}, {}, {}, RepairKind::ResetOptimizer};
  const int64_t step = cat.optimizer_step.value_or(0);
  for (const auto& p : params) {
    if (p.exp_avg || p.exp_avg_sq) ++with_state;
    if (p.exp_avg_sq && p.exp_avg_sq->count > 0) {
      ++with_moments;
      const auto& v = *p.exp_avg_sq;
      if (v.zeros == v.count && step > 0) zeroed.params.push_back(p.name);
      if (v.negatives > 0) negative.params.push_back(p.name);
      if (step == 0 && v.zeros < v.count) fresh_moments.params.push_back(p.name);
    }
  }
  if (with_state == 0 && !cat.optimizer_state_keys.empty()) return;
  if (with_state == 0) {
    out.push_back({"optimizer-state-empty", Severity::Info,
                   "The optimizer state is empty (no exp_avg/exp_avg_sq): the optimizer starts fresh, as after a "
                   "reset. Bias correction restarts at step 1.",
                   {}, {}, {}, RepairKind::None});
    return;
  }
  if (!zeroed.params.empty()) {
    zeroed.evidence = {{"step", double(step)}, {"params_affected", double(zeroed.params.size())}};
    zeroed.message = "exp_avg_sq is all zeros for " + std::to_string(zeroed.params.size()) +
                     " params although the optimizer step is " + std::to_string(step) +
                     ": the second moments were lost while the step counter was kept, so Adam's bias correction "
                     "will take huge steps. Fix: reset the optimizer state so step and moments restart together "
                     "(ckptdoc repair --reset-optimizer). Affected: " + list_names(zeroed.params) + ".";
    out.push_back(std::move(zeroed));
  }
  if (!negative.params.empty()) {
    negative.message = "exp_avg_sq has negative values (impossible for a running mean of squares) in " +
                       list_names(negative.params) + ". Fix: reset the optimizer state (ckptdoc repair --reset-optimizer).";
    out.push_back(std::move(negative));
  }
  if (!fresh_moments.params.empty()) {
    fresh_moments.message = "The optimizer step is 0 but " + std::to_string(fresh_moments.params.size()) +
                            " params have non-zero moments: step and moments disagree. Affected: " +
                            list_names(fresh_moments.params) + ".";
    out.push_back(std::move(fresh_moments));
  }
}

void world_size_rules(const deepspeed::Catalog& cat, std::vector<Finding>& out) {
  const bool reported = std::any_of(out.begin(), out.end(), [](const Finding& f) { return f.code == "world-size-mismatch"; });
  if (reported || cat.optim_file_count == 0 || cat.dp_world_size <= 0) return;
  std::string why;
  if (cat.dp_world_size != cat.optim_file_count)
    why = "the model file says dp_world_size " + std::to_string(cat.dp_world_size) + " but there are " +
          std::to_string(cat.optim_file_count) + " optimizer files";
  for (size_t g = 0; g < cat.partition_count.size() && why.empty(); ++g)
    if (cat.partition_count[g] != cat.optim_file_count)
      why = "group " + std::to_string(g) + " has partition_count " + std::to_string(cat.partition_count[g]) +
            " but there are " + std::to_string(cat.optim_file_count) + " optimizer files";
  if (why.empty()) return;
  out.push_back({"world-size-mismatch", Severity::Error,
                 "World sizes disagree: " + why + ". DeepSpeed refuses to load optimizer states at another world size. "
                 "Fix: re-partition to the world size you will train with (ckptdoc repair --repartition --world-size N).",
                 {}, {}, {{"dp_world_size", double(cat.dp_world_size)}, {"optim_files", double(cat.optim_file_count)}},
                 RepairKind::Repartition});
}

void loss_scale_rules(const deepspeed::Catalog& cat, std::vector<Finding>& out) {
  if (cat.lp_dtype != DType::F16 || !cat.loss_scaler.present) return;
  const auto& ls = cat.loss_scaler;
  if (ls.dynamic && ls.cur_scale <= std::max(ls.min_scale, 1.0)) {
    out.push_back({"loss-scale-collapsed", Severity::Warning,
                   "The fp16 dynamic loss scale is at its floor (" + num(ls.cur_scale) +
                       "): gradients overflowed again and again. Training is probably diverging; check the learning "
                       "rate and data, or switch to bf16.",
                   {}, {}, {{"cur_scale", ls.cur_scale}, {"min_scale", ls.min_scale}}, RepairKind::None});
  } else if (cat.global_steps >= 10 && cat.skipped_steps * 5 > cat.global_steps) {
    out.push_back({"loss-scale-collapsed", Severity::Warning,
                   std::to_string(cat.skipped_steps) + " of " + std::to_string(cat.global_steps) +
                       " steps were skipped for fp16 overflow: the loss scale keeps collapsing.",
                   {}, {}, {{"skipped_steps", double(cat.skipped_steps)}, {"global_steps", double(cat.global_steps)}},
                   RepairKind::None});
  }
}

}  // namespace

double far_fraction(const DivergenceStats& d) {
  if (d.count == 0) return 0;
  uint64_t far = 0;
  for (int b = 9; b < UlpHistogram::kBuckets; ++b) far += d.ulp.counts[static_cast<size_t>(b)];
  return double(far) / double(d.count);
}

std::vector<Finding> apply_rules(const deepspeed::Catalog& catalog, const std::vector<ParamReport>& params,
                                 const std::vector<deepspeed::Problem>& scan_problems, const MismatchThresholds& th) {
  std::vector<Finding> out;
  for (const auto* list : {&catalog.problems, &scan_problems})
    for (const auto& p : *list) {
      Finding f{p.code, severity_of(p.severity), p.message, p.params, p.ranks, {}, RepairKind::None};
      if (p.code == "world-size-mismatch") f.repair = RepairKind::Repartition;
      out.push_back(std::move(f));
    }
  master_rules(catalog, params, th, out);
  nonfinite_rules(params, out);
  optimizer_rules(catalog, params, out);
  world_size_rules(catalog, out);
  loss_scale_rules(catalog, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return static_cast<int>(a.severity) > static_cast<int>(b.severity); });
  return out;
}

}  // namespace ckptdoc::analysis
