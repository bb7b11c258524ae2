#include "sources/deepspeed/tp_consistency.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/number_text.h"
#include "ckptdoc/short_list.h"
#include "ckptdoc/sources/deepspeed/replica_vote.h"

namespace ckptdoc::deepspeed::detail {

using analysis::Finding;
using analysis::finding_of;

namespace {

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

std::string rank_text(const std::set<int>& ranks) {
  std::string r;
  for (int k : ranks) r += (r.empty() ? "" : ", ") + std::to_string(k);
  return r;
}

// One tensor rank's copy of a replicated param.
struct Copy {
  int tp_rank = 0;
  std::optional<Tensor> lp;
  std::vector<float> fp32;
};

std::vector<Copy> read_copies(const std::vector<std::shared_ptr<const deepspeed::Checkpoint>>& members,
                              const std::string& name) {
  std::vector<Copy> copies;
  for (size_t k = 0; k < members.size(); ++k) {
    if (!members[k]) continue;
    const auto gp = members[k]->catalog().find_param(name);
    if (!gp) continue;  // named by the catalog's tp-shape-mismatch
    copies.push_back({static_cast<int>(k), members[k]->lp_param(name),
                      members[k]->assemble(gp->first, gp->second, false).fp32});
  }
  return copies;
}

// How far copy `b` is from `a`: 16-bit weights (compared where both have them) and masters.
struct Distance {
  bool differs = false;
  double lp = 0, fp32 = 0;
};

Distance distance(const Copy& a, const Copy& b) {
  Distance d;
  if (a.lp && b.lp && !same_bits(*a.lp, *b.lp)) {
    d.differs = true;
    d.lp = max_abs_diff(a.lp->to_float(), b.lp->to_float());
  }
  if (!a.fp32.empty() && !b.fp32.empty()) {
    const double m = max_abs_diff(a.fp32, b.fp32);
    if (m != 0 || a.fp32.size() != b.fp32.size()) {
      d.differs = true;
      d.fp32 = m;
    }
  }
  return d;
}

// The copies judged by deepspeed::vote_replicas (export's --force takes the same copy), with how far the
// others are from the one taken as right (the majority's, else tensor rank 0's).
struct Vote {
  size_t classes = 0;
  bool majority = false;
  std::vector<int> outvoted;
  double worst_lp = 0, worst_fp32 = 0;
};

Vote vote(const std::vector<Copy>& copies) {
  const deepspeed::ReplicaVote rv = deepspeed::vote_replicas(
      copies.size(), [&](size_t a, size_t b) { return !distance(copies[a], copies[b]).differs; });
  Vote v;
  v.classes = rv.classes();
  v.majority = rv.majority;
  if (v.classes <= 1) return v;
  size_t first_right = 0;
  while (rv.class_of[first_right] != rv.reference) ++first_right;
  const Copy& reference = copies[first_right];
  for (size_t i = 0; i < copies.size(); ++i) {
    const Distance d = distance(reference, copies[i]);
    if (!d.differs) continue;
    v.worst_lp = std::max(v.worst_lp, d.lp);
    v.worst_fp32 = std::max(v.worst_fp32, d.fp32);
    if (v.majority) v.outvoted.push_back(copies[i].tp_rank);
  }
  return v;
}

}  // namespace

std::vector<Finding> tp_consistency_findings(const deepspeed::Checkpoint& job,
                                             const std::optional<deepspeed::TpRules>& rules,
                                             Progress* progress) {
  std::vector<Finding> out;
  const auto& t = job.catalog().topology;
  if (t.tp <= 1) return out;
  if (!rules) {
    out.emplace_back(
        model::Code::TpRulesUnknown,
        "This tensor-parallel checkpoint carries no universal_checkpoint_info (Megatron-DeepSpeed saves "
        "one) and no --tp-rules file was given: params replicated across tensor ranks (layer norms, "
        "row-parallel biases) could not be told apart from split ones, so they were not compared. "
        "Export can still write each tensor rank's slices (--tp-rank)");
    return out;
  }
  if (progress) progress->set_stage("comparing replicated params across tensor ranks", 0);
  Finding f = finding_of(model::Code::TpReplicatedMismatch);
  std::set<int> outliers;   // tensor ranks outvoted by a majority that agrees
  std::set<int> undecided;  // tensor ranks of params where no majority agrees
  size_t params_undecided = 0;
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
          {
            Finding f(model::Code::TpRulesInvalid, e.what());
            f.params = {name};
            out.push_back(std::move(f));
          }
          return out;
        }
        if (!rule || rule->kind != deepspeed::TpMerge::Replicated) continue;
        if (progress) progress->check();
        ++compared;
        const auto copies = read_copies(members, name);
        const auto votes = vote(copies);
        if (votes.classes == 1) continue;
        f.params.push_back(name);
        worst_lp = std::max(worst_lp, votes.worst_lp);
        worst_fp32 = std::max(worst_fp32, votes.worst_fp32);
        if (votes.majority) {
          outliers.insert(votes.outvoted.begin(), votes.outvoted.end());
        } else {
          ++params_undecided;
          for (const auto& c : copies) undecided.insert(c.tp_rank);
        }
      }
    }
  }
  if (f.params.empty()) return out;
  std::set<int> ranks = outliers;
  ranks.insert(undecided.begin(), undecided.end());
  f.ranks.assign(ranks.begin(), ranks.end());
  const std::string list = short_list(f.params, 6);
  f.evidence = {{"params_affected", double(f.params.size())},
                {"params_compared", double(compared)},
                {"params_without_majority", double(params_undecided)},
                {"max_abs_diff_lp", worst_lp},
                {"max_abs_diff_fp32", worst_fp32}};
  std::string who;
  if (!outliers.empty())
    who += "Tensor rank(s) " + rank_text(outliers) +
           " disagree with the other tensor ranks, which agree with each other: they trained apart. ";
  if (params_undecided)
    who += std::to_string(params_undecided) + " of these params have no majority among tensor ranks " +
           rank_text(undecided) + (t.tp == 2 ? " (two copies)" : "") +
           ", so which copy is right cannot be told from the checkpoint. ";
  f.message =
      std::to_string(f.params.size()) + " of " + std::to_string(compared) + " params that " + rules->source +
      " calls replicated across tensor ranks differ between tensor ranks (" +
      (worst_lp > 0 ? "16-bit weights up to " + three_significant_digits(worst_lp) + " apart"
                    : std::string("16-bit weights equal")) +
      (worst_fp32 > 0 ? ", fp32 masters up to " + three_significant_digits(worst_fp32) + " apart"
                      : std::string(", fp32 masters equal")) +
      "): " + list + ". " + who +
      "Each tensor rank computes with its own copy; DeepSpeed's ds_to_universal.py refuses such a "
      "checkpoint, and so does ckptdoc's merged export unless --force (then it writes the copy most tensor "
      "ranks hold, else tensor rank 0's). Find out why the ranks trained apart (their data, a missed "
      "all-reduce) before resuming";
  out.push_back(std::move(f));
  return out;
}

}  // namespace ckptdoc::deepspeed::detail
