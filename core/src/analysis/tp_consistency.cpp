#include "tp_consistency.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "ckptdoc/error.h"

namespace ckptdoc::analysis {

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

// max |a - b| over equal-length float vectors; NaN where the two disagree on being NaN.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool na = std::isnan(a[i]), nb = std::isnan(b[i]);
    if (na || nb) {
      if (na != nb) m = INFINITY;
      continue;
    }
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return m;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype != b.dtype || a.shape != b.shape) return false;
  return a.to_bytes() == b.to_bytes();
}

}  // namespace

std::vector<Finding> tp_consistency_findings(const deepspeed::Checkpoint& job,
                                             const std::optional<deepspeed::TpRules>& rules,
                                             Progress* progress) {
  std::vector<Finding> out;
  const auto& t = job.catalog().topology;
  if (t.tp <= 1) return out;
  if (!rules) {
    out.push_back(
        {"tp-rules-unknown",
         Severity::Info,
         "This tensor-parallel checkpoint carries no universal_checkpoint_info (Megatron-DeepSpeed saves "
         "one) and no --tp-rules file was given: params replicated across tensor ranks (layer norms, "
         "row-parallel biases) could not be told apart from split ones, so they were not compared. "
         "Export can still write each tensor rank's slices (--tp-rank)",
         {},
         {},
         {},
         RepairKind::None});
    return out;
  }
  if (progress) progress->set_stage("comparing replicated params across tensor ranks", 0);
  Finding f{"tp-replicated-mismatch", Severity::Error, "", {}, {}, {}, RepairKind::None};
  std::set<int> ranks;
  double worst_lp = 0, worst_fp32 = 0;
  size_t compared = 0;
  for (int stage = 0; stage < t.pp; ++stage) {
    std::vector<std::shared_ptr<const deepspeed::Checkpoint>> members;
    for (int k = 0; k < t.tp; ++k) {
      try {
        members.push_back(job.slice(stage * t.tp + k));
      } catch (const Error&) {
        members.push_back(nullptr);  // unreadable: a catalog problem already
      }
    }
    if (!members[0]) continue;
    const auto& c0 = members[0]->catalog();
    for (const auto& g : c0.groups) {
      for (size_t i = 0; i < g.params.size(); ++i) {
        const std::string& name = g.params[i].name;
        std::optional<deepspeed::TpRule> rule;
        try {
          rule = rules->rule_for(name);
        } catch (const Error& e) {
          out.push_back({"tp-rules-invalid", Severity::Error, e.what(), {name}, {}, {}, RepairKind::None});
          return out;
        }
        if (!rule || rule->kind != deepspeed::TpMerge::Replicated) continue;
        if (progress) progress->check();
        ++compared;
        const auto lp0 = members[0]->lp_param(name);
        const auto fp0 = members[0]->assemble(g.index, static_cast<int>(i), false).fp32;
        bool differs = false;
        for (int k = 1; k < t.tp; ++k) {
          if (!members[static_cast<size_t>(k)]) continue;
          const auto& s = *members[static_cast<size_t>(k)];
          const auto gp = s.catalog().find_param(name);
          if (!gp) continue;  // named by the catalog's tp-shape-mismatch
          const auto lpk = s.lp_param(name);
          if (lp0 && lpk && !same_bits(*lp0, *lpk)) {
            worst_lp = std::max(worst_lp, max_abs_diff(lp0->to_float(), lpk->to_float()));
            differs = true;
            ranks.insert(k);
          }
          const auto fpk = s.assemble(gp->first, gp->second, false).fp32;
          if (!fp0.empty() && !fpk.empty()) {
            const double d = max_abs_diff(fp0, fpk);
            if (d != 0 || fp0.size() != fpk.size()) {
              worst_fp32 = std::max(worst_fp32, d);
              differs = true;
              ranks.insert(k);
            }
          }
        }
        if (differs) f.params.push_back(name);
      }
    }
  }
  if (f.params.empty()) return out;
  f.ranks.assign(ranks.begin(), ranks.end());
  std::string list;
  for (size_t i = 0; i < f.params.size() && i < 6; ++i) list += (i ? ", " : "") + f.params[i];
  if (f.params.size() > 6) list += ", ... (" + std::to_string(f.params.size() - 6) + " more)";
  std::string rank_list;
  for (int r : f.ranks) rank_list += (rank_list.empty() ? "" : ", ") + std::to_string(r);
  f.evidence = {{"params_affected", double(f.params.size())},
                {"params_compared", double(compared)},
                {"max_abs_diff_lp", worst_lp},
                {"max_abs_diff_fp32", worst_fp32}};
  f.message =
      std::to_string(f.params.size()) + " of " + std::to_string(compared) + " params that " + rules->source +
      " calls replicated across tensor ranks differ between tensor rank 0 "
      "and tensor rank(s) " +
      rank_list + " (" +
      (worst_lp > 0 ? "16-bit weights up to " + num(worst_lp) + " apart"
                    : std::string("16-bit weights equal")) +
      (worst_fp32 > 0 ? ", fp32 masters up to " + num(worst_fp32) + " apart"
                      : std::string(", fp32 masters equal")) +
      "): " + list +
      ". Each tensor rank then computes with its own copy; "
      "DeepSpeed's ds_to_universal.py refuses such a checkpoint, and a merged export takes tensor rank 0's. "
      "Find which rank trained apart (its data, a missed all-reduce) before resuming";
  out.push_back(std::move(f));
  return out;
}

}  // namespace ckptdoc::analysis
