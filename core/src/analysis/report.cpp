#include "ckptdoc/analysis/report.h"

#include <algorithm>
#include <cmath>

#include "ckptdoc/deepspeed/rank_owners.h"

namespace ckptdoc::analysis {

Finding finding_of(model::Code code, std::string message) {
  Finding f;
  f.code = model::code_name(code);
  f.severity = model::default_severity(code);
  f.message = std::move(message);
  f.repair = model::default_repair(code);
  return f;
}

Finding finding_from(const deepspeed::Problem& p) {
  Finding f;
  f.code = p.code;
  f.severity = p.severity;
  f.message = p.message;
  f.params = p.params;
  f.ranks = p.ranks;
  f.details = p.details;
  f.pp = p.pp;
  f.tp = p.tp;
  f.not_checked = p.not_checked;
  if (!p.file.empty()) f.files.push_back(p.file);
  f.repair = p.repair ? *p.repair : model::default_repair(model::code_of(p.code));
  // A missing ZeRO-3 model file is a rank-file-missing whose repair is the one of #7546's lost files.
  if (deepspeed::is_missing_zero3_model_files_problem(p)) f.repair = RepairKind::RestoreModelFiles;
  return f;
}

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
