#include "ckptdoc/analysis/report.h"

#include <algorithm>
#include <cmath>

#include "ckptdoc/deepspeed/rank_owners.h"

namespace ckptdoc::analysis {

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::Error:
      return "error";
    case Severity::Warning:
      return "warning";
    default:
      return "info";
  }
}

Severity severity_of(const std::string& name) {
  if (name == "error") return Severity::Error;
  if (name == "warning") return Severity::Warning;
  return Severity::Info;
}

Finding finding_from(const deepspeed::Problem& p) {
  Finding f;
  f.code = p.code;
  f.severity = severity_of(p.severity);
  f.message = p.message;
  f.params = p.params;
  f.ranks = p.ranks;
  f.details = p.details;
  f.pp = p.pp;
  f.tp = p.tp;
  f.not_checked = p.not_checked;
  if (!p.file.empty()) f.files.push_back(p.file);
  if (p.code == "world-size-mismatch") f.repair = RepairKind::Repartition;
  if (p.code == "optimizer-state-shape-mismatch") f.repair = RepairKind::ResetOptimizer;
  if (p.code == "zero3-model-files-not-saved" || deepspeed::is_missing_zero3_model_files_problem(p))
    f.repair = RepairKind::RestoreModelFiles;
  return f;
}

std::string_view repair_name(RepairKind r) {
  switch (r) {
    case RepairKind::RefreshFp32:
      return "refresh-fp32";
    case RepairKind::ResetOptimizer:
      return "reset-optimizer";
    case RepairKind::DropOptimizer:
      return "drop-optimizer";
    case RepairKind::Repartition:
      return "repartition";
    case RepairKind::RestoreModelFiles:
      return "restore-model-files";
    default:
      return "";
  }
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
