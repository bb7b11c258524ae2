#include "rules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/number_text.h"
#include "ckptdoc/short_list.h"

namespace ckptdoc::analysis {
namespace {

std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g%%", f * 100.0);
  return b;
}
std::string list_names(const std::vector<std::string>& names) {
  return short_list(names, 6);
}

bool is_mixed_precision(const model::Catalog& c) {
  return c.lp_dtype == DType::F16 || c.lp_dtype == DType::BF16;
}

}  // namespace

void master_findings(const std::vector<ParamReport>& params, const MasterContext& ctx,
                     const MismatchThresholds& th, std::vector<Finding>& out) {
  Finding stale = finding_of(model::Code::Fp32MasterMismatch);
  Finding drift = finding_of(model::Code::Fp32MasterDrift);
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
      if (rd.count > 0 && rd.exact_fraction() < th.healthy_exact_fraction)
        (is_stale ? stale_ranks : drift_ranks).insert(rank);
  }
  // Next to stale masters, params that merely look like drift are stale too: values that barely moved from
  // their initialisation (LayerNorm weights near 1.0) round alike in bf16/fp16 by chance. One cause, one
  // finding.
  size_t near_init = 0;
  if (!stale.params.empty() && !drift.params.empty()) {
    near_init = drift.params.size();
    stale.params.insert(stale.params.end(), drift.params.begin(), drift.params.end());
    stale_total.merge(drift_total);
    stale_ranks.insert(drift_ranks.begin(), drift_ranks.end());
    drift.params.clear();
  }
  const std::string lp = lp_name(ctx.lp_dtype);
  const auto& files_of = ctx.files_of;
  if (!stale.params.empty()) {
    stale.ranks.assign(stale_ranks.begin(), stale_ranks.end());
    stale.files = files_of(stale_ranks);
    stale.evidence = {{"params_affected", double(stale.params.size())},
                      {"params_compared", double(compared)},
                      {"exact_fraction", stale_total.exact_fraction()},
                      {"far_fraction", far_fraction(stale_total)},
                      {"rel_l2", stale_total.rel_l2()},
                      {"worst_rel_l2", worst_rel},
                      {"max_abs", stale_total.max_abs},
                      {"mean_abs", stale_total.mean_abs()}};
    // NaN/Inf elements are left out of the distance: with many of them it says little, and they are not the
    // #762 signature (that is finite random values) but a diverged run or damage.
    const uint64_t finite = stale_total.count - stale_total.nonfinite;
    // Every finite element exact: the NaN/Inf alone make the mismatch.
    const bool nonfinite_only =
        stale_total.nonfinite > 0 &&
        (finite == 0 ||
         static_cast<double>(stale_total.exact) / static_cast<double>(finite) >= th.healthy_exact_fraction);
    const std::string distance =
        finite == 0 ? "every compared element is NaN or Inf on one side, so no distance can be given"
        : stale_total.nonfinite > 0
            ? "relative L2 distance " + three_significant_digits(stale_total.rel_l2()) + " over the " +
                  std::to_string(finite) + " finite elements (" + std::to_string(stale_total.nonfinite) +
                  " are NaN or Inf on one side and left out: see nonfinite-values)"
            : "relative L2 distance " + three_significant_digits(stale_total.rel_l2());
    const std::string cause =
        nonfinite_only
            ? "The elements that differ are NaN or Inf (every finite one is exact): masters that are NaN or "
              "Inf come from a diverged run or damage, not from a missed load: the next "
              "optimizer step would write them into the weights. "
            : "This is the signature of masters left at their initial values (" + ctx.cause +
                  "): the next optimizer step would overwrite the trained weights with them. ";
    stale.evidence["nonfinite_elements"] = double(stale_total.nonfinite);
    stale.message = "The " + ctx.masters + " of " + std::to_string(stale.params.size()) + " of " +
                    std::to_string(compared) + " trainable params do not match their " + lp +
                    " weights: only " + pct(stale_total.exact_fraction()) + " of elements equal the " + lp +
                    " rounding of the master (a healthy checkpoint is ~100%), " + distance + ". " + cause +
                    "Fix: refresh the " + ctx.masters + " from the " + lp + " weights (" + ctx.fix +
                    "). Affected: " + list_names(stale.params) + "." +
                    (near_init ? " (" + std::to_string(near_init) +
                                     " of them still match in most elements only because "
                                     "their values barely moved from the initial ones.)"
                               : "");
    if (near_init) stale.evidence["params_matching_by_chance"] = double(near_init);
    out.push_back(std::move(stale));
  }
  if (!drift.params.empty()) {
    drift.ranks.assign(drift_ranks.begin(), drift_ranks.end());
    drift.files = files_of(drift_ranks);
    drift.evidence = {{"params_affected", double(drift.params.size())},
                      {"exact_fraction", drift_total.exact_fraction()},
                      {"rel_l2", drift_total.rel_l2()},
                      {"max_abs", drift_total.max_abs}};
    drift.message =
        std::to_string(drift.params.size()) + " params have " + ctx.masters + " that differ from their " +
        lp + " weights by a few ULPs beyond rounding (" + pct(drift_total.exact_fraction()) +
        " exact, relative L2 " + three_significant_digits(drift_total.rel_l2()) +
        "): the weights and masters were saved at slightly different moments. Usually harmless; refresh "
        "the masters if the " +
        lp + " weights are the ones you trust. Affected: " + list_names(drift.params) + ".";
    out.push_back(std::move(drift));
  }
}

namespace {

void master_rules(const model::Catalog& cat, const std::vector<ParamReport>& params,
                  const MismatchThresholds& th, std::vector<Finding>& out) {
  if (!is_mixed_precision(cat)) return;
  MasterContext ctx;
  ctx.lp_dtype = cat.lp_dtype;
  // fp16/bf16_master_weights_and_grads: the scan's note is already in `out`; name the masters as stored.
  const auto note = std::find_if(out.begin(), out.end(), [](const Finding& f) {
    return f.code == model::code_name(model::Code::MastersIn16Bit);
  });
  ctx.masters = note == out.end() ? "fp32 master weights"
                : note->details.count("dtype") && note->details.at("dtype") == "bfloat16"
                    ? "bf16 master weights"
                    : "fp16 master weights";
  // How the masters go stale, and their fix, in the source's words (DeepSpeed: load_optimizer_states=False).
  const auto words =
      cat.source_rules ? cat.source_rules->stale_master_words() : model::SourceRules::StaleMasterWords{};
  ctx.cause = words.cause;
  ctx.fix = words.fix;
  // The files holding the masters concerned: those the source names for the ranks' optimizer state.
  ctx.files_of = [&cat](const std::set<int>& ranks) {
    return cat.source_rules ? cat.source_rules->optimizer_files(ranks) : std::vector<std::string>{};
  };
  master_findings(params, ctx, th, out);
}

void nonfinite_rules(const std::vector<ParamReport>& params, std::vector<Finding>& out) {
  for (const char* kind : {"lp", "fp32", "exp_avg", "exp_avg_sq"}) {
    Finding f = finding_of(model::Code::NonfiniteValues);
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
    f.repair =
        moment ? RepairKind::ResetOptimizer : (k == "fp32" ? RepairKind::RefreshFp32 : RepairKind::None);
    std::string rank_list;
    for (int r : f.ranks) rank_list += (rank_list.empty() ? "" : ", ") + std::to_string(r);
    f.evidence = {{"count", double(total)}, {"params_affected", double(f.params.size())}};
    f.message = std::to_string(total) + " NaN/Inf values in ";
    f.message += k == "lp"     ? "the module weights"
                 : k == "fp32" ? "the fp32 master weights"
                               : "the optimizer's " + k;
    f.message += f.ranks.size() > 1 ? " on ranks " : " on rank ";
    f.message += rank_list;
    f.message += " (";
    f.message += list_names(f.params);
    f.message += "). ";
    f.message +=
        moment ? "Training would propagate them into the weights at the next step. Fix: reset the optimizer "
                 "state (ckptdoc repair --reset-optimizer), or go back to an earlier checkpoint."
        : k == "fp32"
            ? "Fix: refresh the masters from the weights if those are finite (ckptdoc repair --refresh-fp32)."
            : "The weights themselves are broken; go back to an earlier checkpoint.";
    out.push_back(std::move(f));
  }
}

// Adam's first update of a param whose moments are zero, relative to lr, when its group continues at `step`
// (the next update is step + 1): m̂/sqrt(v̂) = ((1-β1)/(1-β1^t)) / sqrt((1-β2)/(1-β2^t)) for one gradient,
// where a fresh start (t = 1) gives exactly 1.
double first_update_factor(int64_t step, double beta1, double beta2) {
  const double t = static_cast<double>(step + 1);
  return ((1.0 - beta1) / (1.0 - std::pow(beta1, t))) / std::sqrt((1.0 - beta2) / (1.0 - std::pow(beta2, t)));
}

bool all_zero(const std::optional<ValueStats>& v) {
  return !v || v->zeros == v->count;
}

// The optimizer rules weigh each flat group's own Adam step against its moments (never global_steps or the
// scheduler, which a #762 load restores from the trained run while the optimizer starts fresh).
void optimizer_rules(const model::Catalog& cat, const std::vector<ParamReport>& params,
                     std::vector<Finding>& out) {
  const model::SourceRules* source = cat.source_rules.get();
  if (source) {
    if (auto missing = source->optimizer_state_missing()) {
      out.push_back(std::move(*missing));
      return;
    }
    if (!source->optimizer_state_saved()) return;
  }
  // How the state comes to be empty or fresh, in the source's words (DeepSpeed: its init step and v0.13+).
  const auto words = source ? source->optimizer_state_words() : model::SourceRules::OptimizerStateWords{};
  auto group_state = [&cat](int g) -> model::OptimizerGroupState {
    if (g >= 0 && static_cast<size_t>(g) < cat.optimizer_groups.size())
      return cat.optimizer_groups[static_cast<size_t>(g)];
    model::OptimizerGroupState s;
    s.step = cat.optimizer_step;
    return s;
  };
  // Per optimizer group (the params that share one Adam step): which params carry trained moments and which
  // carry none. A universal folder's flat groups are single params: they are grouped by the optimizer group
  // they came from, or a param that never got a gradient would look like a whole group whose moments were
  // lost.
  struct GroupView {
    std::vector<std::string> zero, trained;
    int flat = -1;  // one of its flat groups (they hold the same step)
  };
  auto optimizer_group = [source](int flat) { return source ? source->optimizer_group(flat) : flat; };
  std::map<int, GroupView> groups;
  size_t with_state = 0;
  Finding lost = finding_of(model::Code::OptimizerStepInconsistent);
  Finding negative = finding_of(model::Code::OptimizerStepInconsistent);
  Finding step_zero = finding_of(model::Code::OptimizerStepInconsistent);
  for (const auto& p : params) {
    if (!p.exp_avg && !p.exp_avg_sq) continue;
    ++with_state;
    if (p.exp_avg_sq && p.exp_avg_sq->negatives > 0) negative.params.push_back(p.name);
    const bool zero = all_zero(p.exp_avg) && all_zero(p.exp_avg_sq);
    const auto st = group_state(p.group);
    if (st.step && *st.step == 0 && !zero) step_zero.params.push_back(p.name);
    auto& gv = groups[optimizer_group(p.group)];
    if (gv.flat < 0) gv.flat = p.group;
    (zero ? gv.zero : gv.trained).push_back(p.name);
    // exp_avg_sq alone wiped while exp_avg survived: the second moments were lost.
    if (!zero && all_zero(p.exp_avg_sq) && st.step && *st.step >= 2) lost.params.push_back(p.name);
  }
  if (with_state == 0) {
    if (!cat.optimizer_state_keys.empty()) return;
    out.emplace_back(
        model::Code::OptimizerStateEmpty,
        "The optimizer state is empty (no exp_avg/exp_avg_sq): the optimizer starts fresh, as after " +
            words.empty_cause + ". Bias correction restarts at step 1.");
    return;
  }
  // Zero moments: the fresh state ZeRO saves (step <= 1: its init runs one zero-gradient step), params added
  // to a continuing group (others in the group trained), or moments lost (the whole group zero at step >= 2).
  Finding fresh = finding_of(model::Code::OptimizerStateFresh);
  Finding grafted = finding_of(model::Code::NewParamsZeroMoments);
  int64_t fresh_step = 0, graft_step = 0;
  double graft_factor = 0;
  for (const auto& [g, gv] : groups) {
    if (gv.zero.empty()) continue;
    const auto st = group_state(gv.flat);
    const int64_t step = st.step.value_or(0);
    if (step <= 1) {
      fresh.params.insert(fresh.params.end(), gv.zero.begin(), gv.zero.end());
      fresh_step = std::max(fresh_step, step);
    } else if (!gv.trained.empty()) {
      grafted.params.insert(grafted.params.end(), gv.zero.begin(), gv.zero.end());
      graft_step = std::max(graft_step, step);
      graft_factor = std::max(graft_factor, first_update_factor(step, st.beta1, st.beta2));
    } else {
      lost.params.insert(lost.params.end(), gv.zero.begin(), gv.zero.end());
      lost.evidence["step"] = double(std::max<int64_t>(step, static_cast<int64_t>(lost.evidence["step"])));
    }
  }
  if (!lost.params.empty()) {
    const auto step = static_cast<int64_t>(lost.evidence["step"]);
    lost.evidence["params_affected"] = double(lost.params.size());
    lost.message =
        "The optimizer's moments are all zero for " + std::to_string(lost.params.size()) +
        " params although its step is " + std::to_string(step) +
        " (a fresh optimizer is at step 1): the moments were lost while the step counter was kept, so "
        "Adam's bias correction will take steps far larger than the learning rate. Fix: reset the "
        "optimizer state so step and moments restart together (ckptdoc repair --reset-optimizer). "
        "Affected: " +
        list_names(lost.params) + ".";
    out.push_back(std::move(lost));
  }
  if (!negative.params.empty()) {
    negative.message = "exp_avg_sq has negative values (impossible for a running mean of squares) in " +
                       list_names(negative.params) +
                       ". Fix: reset the optimizer state (ckptdoc repair --reset-optimizer).";
    out.push_back(std::move(negative));
  }
  if (!step_zero.params.empty()) {
    step_zero.message =
        "The optimizer step is 0 but " + std::to_string(step_zero.params.size()) +
        " params have non-zero moments: step and moments disagree, and the next step divides by "
        "1 - beta^1 as if nothing had been accumulated. Fix: reset the optimizer state "
        "(ckptdoc repair --reset-optimizer). Affected: " +
        list_names(step_zero.params) + ".";
    out.push_back(std::move(step_zero));
  }
  if (!grafted.params.empty()) {
    grafted.evidence = {{"step", double(graft_step)},
                        {"params_affected", double(grafted.params.size())},
                        {"first_update_vs_lr", graft_factor}};
    grafted.message =
        std::to_string(grafted.params.size()) +
        " params have all-zero Adam moments while the rest of their group trained to step " +
        std::to_string(graft_step) +
        ": they were added to a running job (a graft) or never got a gradient. " + words.one_step_keeper +
        " keeps one step per group, so Adam's bias correction treats their first gradient as if it had been "
        "averaged over " +
        std::to_string(graft_step + 1) + " steps: their first update will be about " +
        three_significant_digits(graft_factor) +
        "x the learning rate per element, where a fresh start moves by 1x. Usually acceptable; to restart "
        "every param's moments together, reset the optimizer (ckptdoc repair --reset-optimizer). "
        "Affected: " +
        list_names(grafted.params) + ".";
    out.push_back(std::move(grafted));
  }
  if (!fresh.params.empty()) {
    fresh.evidence = {{"step", double(fresh_step)}, {"params_affected", double(fresh.params.size())}};
    fresh.message = "The optimizer state is fresh: Adam step " + std::to_string(fresh_step) +
                    " with all-zero moments for " + std::to_string(fresh.params.size()) + " params, as " +
                    words.fresh_cause + ". Training restarts Adam's moments from here; nothing to fix.";
    out.push_back(std::move(fresh));
  }
}

}  // namespace

std::string lp_name(DType t) {
  return t == DType::BF16 ? "bf16" : t == DType::F16 ? "fp16" : std::string(dtype_name(t));
}

double far_fraction(const DivergenceStats& d) {
  if (d.count == 0) return 0;
  uint64_t far = 0;
  for (int b = 9; b < UlpHistogram::kBuckets; ++b) far += d.ulp.counts[static_cast<size_t>(b)];
  return double(far) / double(d.count);
}

std::vector<Finding> apply_rules(const model::Catalog& catalog, const std::vector<ParamReport>& params,
                                 const std::vector<Finding>& scan_problems, RuleSet rules,
                                 const MismatchThresholds& th) {
  std::vector<Finding> out;
  for (const auto* list : {&catalog.problems, &scan_problems})
    for (const auto& p : *list) {
      out.push_back(p);
    }
  master_rules(catalog, params, th, out);
  nonfinite_rules(params, out);
  if (rules == RuleSet::All) {
    optimizer_rules(catalog, params, out);
    moments_cast_rules(catalog, params, out);
  }
  // What only the source's own records tell (DeepSpeed: world sizes, the fp16 loss scale).
  if (catalog.source_rules) catalog.source_rules->record_rules(out);
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  return out;
}

}  // namespace ckptdoc::analysis
