#include "ckptdoc/analysis/report.h"

#include <algorithm>
#include <cmath>

namespace ckptdoc::analysis {

double RankMoments::exp_avg_rms() const {
  return exp_avg_count ? std::sqrt(exp_avg_sum_sq / static_cast<double>(exp_avg_count)) : std::nan("");
}

double RankMoments::exp_avg_sq_mean() const {
  return exp_avg_sq_count ? exp_avg_sq_sum / static_cast<double>(exp_avg_sq_count) : std::nan("");
}

double ParamReport::severity_score() const {
  double score = 0;
  if (lp_vs_fp32 && lp_vs_fp32->count > 0) {
    score += (1.0 - lp_vs_fp32->exact_fraction()) * 10.0;
    const double rel = lp_vs_fp32->rel_l2();
    score += std::isfinite(rel) ? std::min(rel, 100.0) : 100.0;
  }
  for (const auto* s : {&lp, &fp32, &exp_avg, &exp_avg_sq})
    if (*s && (*s)->finite_count() != (*s)->count) score += 1000.0;
  return score;
}

bool Report::has_error() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::Error; });
}

}  // namespace ckptdoc::analysis
