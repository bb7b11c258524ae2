// The diagnosis as JSON (ckptdoc diagnose --json, the GUI's export, tests).
#include <cmath>
#include <nlohmann/json.hpp>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/analysis/verdict.h"

namespace ckptdoc::analysis {
namespace {
using nlohmann::json;

json finite_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json log_histogram_json(const LogHistogram& h) {
  // Only the non-empty range, with log10 lower edges of each bin.
  int lo = LogHistogram::kBins, hi = -1;
  for (int i = 0; i < LogHistogram::kBins; ++i)
    if (h.counts[static_cast<size_t>(i)]) {
      lo = std::min(lo, i);
      hi = std::max(hi, i);
    }
  json edges = json::array(), counts = json::array();
  for (int i = lo; i <= hi; ++i) {
    edges.push_back(LogHistogram::log10_lower_edge(i));
    counts.push_back(h.counts[static_cast<size_t>(i)]);
  }
  if (hi >= lo) edges.push_back(LogHistogram::log10_lower_edge(hi + 1));
  return json{{"log10_edges", edges},     {"counts", counts},       {"zeros", h.zeros},
              {"underflow", h.underflow}, {"overflow", h.overflow}, {"nonfinite", h.nonfinite}};
}

json stats_json(const ValueStats& s) {
  return json{{"count", s.count},
              {"min", finite_or_null(s.min)},
              {"max", finite_or_null(s.max)},
              {"mean", finite_or_null(s.mean())},
              {"rms", finite_or_null(s.rms())},
              {"nan", s.nan},
              {"pos_inf", s.pos_inf},
              {"neg_inf", s.neg_inf},
              {"zeros", s.zeros},
              {"subnormals", s.subnormals},
              {"negatives", s.negatives},
              {"log10_abs_histogram", log_histogram_json(s.log_abs)},
              {"log10_abs_negative_histogram", log_histogram_json(s.log_abs_negative)}};
}

json optional_json(const std::optional<double>& v) {
  return v ? finite_or_null(*v) : json(nullptr);
}

json live_json(const LiveReport& l) {
  json lr = json::array();
  for (const auto& v : l.lr) lr.push_back(optional_json(v));
  return json{{"snapshot_id", l.snapshot_id},
              {"created_unix", l.created_unix},
              {"global_steps", l.global_steps},
              {"global_samples", l.global_samples},
              {"skipped_steps", l.skipped_steps},
              {"grad_norm", optional_json(l.grad_norm)},
              {"gradient_clipping", optional_json(l.gradient_clipping)},
              {"loss_scale", optional_json(l.loss_scale)},
              {"min_loss_scale", optional_json(l.min_loss_scale)},
              {"overflow", l.overflow ? json(*l.overflow) : json(nullptr)},
              {"lr", lr},
              {"grads_requested", l.grads_requested},
              {"grads_present", l.grads_present},
              {"recorded_grad_norm", optional_json(l.recorded_grad_norm)},
              {"grad_numel", l.grad_numel},
              {"grad_nonfinite", l.grad_nonfinite},
              {"grad_nonfinite_by_param", l.grad_nonfinite_by_param}};
}

json divergence_json(const DivergenceStats& d) {
  json ulp = json::array();
  for (int b = 0; b < UlpHistogram::kBuckets; ++b)
    ulp.push_back(
        json{{"bucket", UlpHistogram::bucket_label(b)}, {"count", d.ulp.counts[static_cast<size_t>(b)]}});
  return json{{"count", d.count},
              {"max_abs", d.max_abs},
              {"mean_abs", finite_or_null(d.mean_abs())},
              {"rel_l2", finite_or_null(d.rel_l2())},
              {"exact_fraction", finite_or_null(d.exact_fraction())},
              {"nonfinite", d.nonfinite},
              {"ulp_histogram", ulp},
              {"log10_abs_diff_histogram", log_histogram_json(d.log_abs_diff)}};
}

}  // namespace

std::string report_json(const Report& report, const model::Catalog& catalog) {
  json findings = json::array();
  for (const auto& f : report.findings) {
    json ev = json::object();
    for (const auto& [k, v] : f.evidence) ev[k] = finite_or_null(v);
    findings.push_back(json{{"code", f.code},
                            {"severity", std::string(severity_name(f.severity))},
                            {"message", f.message},
                            {"params", f.params},
                            {"ranks", f.ranks},
                            {"evidence", ev},
                            {"repair", std::string(repair_name(f.repair))},
                            {"pp", f.pp >= 0 ? json(f.pp) : json(nullptr)},
                            {"tp", f.tp >= 0 ? json(f.tp) : json(nullptr)},
                            {"files", f.named_files()}});
    if (!f.details.empty()) findings.back()["details"] = f.details;
  }
  json params = json::array();
  for (const auto& p : report.params) {
    json j{{"name", p.name},
           {"group", p.group},
           {"shape", p.shape},
           {"numel", p.numel},
           {"lp_dtype", std::string(dtype_name(p.lp_dtype))},
           {"pp", p.pp >= 0 ? json(p.pp) : json(nullptr)},
           {"tp", p.tp >= 0 ? json(p.tp) : json(nullptr)}};
    j["lp_vs_fp32"] = p.lp_vs_fp32 ? divergence_json(*p.lp_vs_fp32) : json(nullptr);
    j["lp"] = p.lp ? stats_json(*p.lp) : json(nullptr);
    j["fp32"] = p.fp32 ? stats_json(*p.fp32) : json(nullptr);
    j["exp_avg"] = p.exp_avg ? stats_json(*p.exp_avg) : json(nullptr);
    j["exp_avg_sq"] = p.exp_avg_sq ? stats_json(*p.exp_avg_sq) : json(nullptr);
    json ranks = json::array();
    for (const auto& [r, d] : p.per_rank)
      ranks.push_back(json{{"rank", r},
                           {"exact_fraction", finite_or_null(d.exact_fraction())},
                           {"rel_l2", finite_or_null(d.rel_l2())},
                           {"max_abs", d.max_abs},
                           {"count", d.count}});
    j["per_rank"] = ranks;
    params.push_back(std::move(j));
  }
  json devices = json::array();
  for (const auto& d : report.devices)
    devices.push_back(json{{"backend", d.backend}, {"ranks", d.ranks}, {"bytes", d.bytes}});
  json out{{"path", catalog.tag_dir},
           {"tag", catalog.tag},
           {"zero_stage", catalog.sharding_stage},
           {"lp_dtype", std::string(dtype_name(catalog.lp_dtype))},
           {"dp_world_size", catalog.dp_world_size},
           {"backend", report.backend},
           {"devices", devices},
           {"bytes_scanned", report.bytes_scanned},
           {"seconds", report.seconds},
           {"has_error", report.has_error()},
           {"findings", findings},
           {"params", params},
           {"parallel",
            {{"mp_world_size", catalog.topology.mp_world_size},
             {"pp", catalog.topology.pp},
             {"tp", catalog.topology.tp},
             {"ep", catalog.topology.ep},
             {"pipeline", catalog.topology.pipeline}}}};
  if (!report.optimizer_files.empty()) {
    json files = json::array();
    for (const auto& o : report.optimizer_files)
      files.push_back(json{{"file", o.file},
                           {"read", o.read},
                           {"params_in_groups", o.params_in_groups},
                           {"params_with_state", o.params_with_state},
                           {"step", o.step ? json(*o.step) : json(nullptr)},
                           {"keys", o.keys},
                           {"dtypes", o.dtypes},
                           {"tensors_scanned", o.tensors_scanned},
                           {"shapes_matched", o.shapes_matched},
                           {"weights_compared", o.weights_compared},
                           {"names_matched", o.names_matched},
                           {"matched_by", o.by_name ? "name" : "shape"}});
    out["optimizer_files"] = files;
  }
  const Verdict v = verdict_of(report, catalog);
  out["verdict"] = {{"kind", v.kind == VerdictKind::Problems ? "problems"
                             : v.kind == VerdictKind::Clean  ? "clean"
                                                             : "nothing-compared"},
                    {"headline", v.headline},
                    {"basis", v.basis},
                    {"not_checked", v.not_checked},
                    {"masters_compared", v.masters_compared},
                    {"moments_checked", v.moments_checked},
                    {"tensors_scanned", v.tensors_scanned}};
  if (report.live) out["live"] = live_json(*report.live);  // snapshots of a live engine
  return out.dump(1);
}

}  // namespace ckptdoc::analysis
