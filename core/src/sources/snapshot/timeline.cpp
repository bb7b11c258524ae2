// Snapshot summaries and the run's time series with its series-only findings.
#include "ckptdoc/sources/snapshot/timeline.h"

#include <algorithm>
#include <cmath>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"

namespace ckptdoc::snapshot {
namespace {

uint64_t nonfinite(const std::optional<ValueStats>& s) {
  return s ? s->nan + s->pos_inf + s->neg_inf : 0;
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

void note(SnapshotSummary& s, const analysis::Finding& f) {
  const std::string sev(analysis::severity_name(f.severity));
  auto rank = [](const std::string& x) {
    return x == "error" ? 3 : x == "warning" ? 2 : x == "info" ? 1 : 0;
  };
  if (rank(sev) > rank(s.worst_severity)) {
    s.worst_severity = sev;
    s.worst_code = f.code;
    s.codes.insert(s.codes.begin(), f.code);
  } else {
    s.codes.push_back(f.code);
  }
}

}  // namespace

SnapshotSummary summarize(const deepspeed::Checkpoint& ckpt, const analysis::Report& report) {
  SnapshotSummary s;
  const auto& cat = ckpt.catalog();
  s.dir = cat.tag_dir;
  s.tag = cat.tag;
  s.global_steps = cat.global_steps;
  s.skipped_steps = cat.skipped_steps;
  if (const Snapshot* snap = ckpt.snapshot()) {
    s.id = snap->manifest().id;
    s.created_unix = snap->manifest().created_unix;
  }
  for (const auto& f : report.findings) s.codes.push_back(f.code);  // already worst first
  if (!report.findings.empty()) {
    s.worst_severity = std::string(analysis::severity_name(report.findings.front().severity));
    s.worst_code = report.findings.front().code;
  }
  uint64_t exact = 0, compared = 0;
  for (const auto& p : report.params) {
    ParamPoint pt;
    if (p.lp_vs_fp32) {
      exact += p.lp_vs_fp32->exact;
      compared += p.lp_vs_fp32->count;
      pt.exact_fraction = p.lp_vs_fp32->exact_fraction();
      pt.rel_l2 = p.lp_vs_fp32->rel_l2();
      pt.max_abs = p.lp_vs_fp32->max_abs;
    }
    pt.nonfinite = nonfinite(p.lp) + nonfinite(p.fp32) + nonfinite(p.exp_avg) + nonfinite(p.exp_avg_sq);
    s.nonfinite_values += pt.nonfinite;
    s.params.emplace(p.name, pt);
  }
  if (compared) s.exact_fraction = static_cast<double>(exact) / static_cast<double>(compared);
  if (report.live) {
    s.global_steps = report.live->global_steps;
    s.skipped_steps = report.live->skipped_steps;
    s.grad_norm = report.live->recorded_grad_norm ? report.live->recorded_grad_norm : report.live->grad_norm;
    s.loss_scale = report.live->loss_scale;
    s.overflow = report.live->overflow;
    s.nonfinite_grads = report.live->grad_nonfinite;
  } else if (cat.loss_scaler.present) {
    s.loss_scale = cat.loss_scaler.cur_scale;
  }
  return s;
}

std::vector<analysis::Finding> Timeline::add(SnapshotSummary s, const TimelineThresholds& t) {
  using analysis::Finding;
  using analysis::Severity;
  points_.erase(std::remove_if(points_.begin(), points_.end(),
                               [&](const SnapshotSummary& p) { return p.dir == s.dir; }),
                points_.end());
  // earlier points in step order (a re-dumped tag replaces its point)
  std::vector<const SnapshotSummary*> before;
  for (const auto& p : points_)
    if (std::tie(p.global_steps, p.created_unix) < std::tie(s.global_steps, s.created_unix))
      before.push_back(&p);
  std::sort(before.begin(), before.end(), [](auto* a, auto* b) { return a->global_steps < b->global_steps; });

  std::vector<Finding> out;
  if (s.loss_scale) {
    double peak = *s.loss_scale;
    for (const auto* p : before)
      if (p->loss_scale) peak = std::max(peak, *p->loss_scale);
    if (*s.loss_scale > 0 && peak / *s.loss_scale >= t.loss_scale_drop) {
      Finding f = analysis::finding_of(model::Code::LossScaleCollapse);
      f.message =
          "The fp16 loss scale fell from " + number(peak) + " to " + number(*s.loss_scale) + " (" +
          number(peak / *s.loss_scale) +
          "x) over the snapshots: overflows keep happening and the scale "
          "does not recover. Gradients are overflowing at every scale tried; look for a loss spike or a "
          "learning rate that is too high.";
      f.evidence = {{"peak_loss_scale", peak}, {"loss_scale", *s.loss_scale}};
      out.push_back(std::move(f));
    }
  }
  if (!before.empty()) {
    const auto* prev = before.back();
    const int64_t steps = s.global_steps - prev->global_steps;
    const int64_t skipped = s.skipped_steps - prev->skipped_steps;
    if (steps >= 2 && skipped > 0 &&
        static_cast<double>(skipped) >= t.skipped_fraction * static_cast<double>(steps)) {
      Finding f = analysis::finding_of(model::Code::StepsSkipped);
      f.message = std::to_string(skipped) + " of the " + std::to_string(steps) + " steps since snapshot " +
                  prev->tag + " were skipped (fp16 overflow): the model is barely training.";
      f.evidence = {{"skipped", static_cast<double>(skipped)}, {"steps", static_cast<double>(steps)}};
      out.push_back(std::move(f));
    }
  }
  if (s.grad_norm && std::isfinite(*s.grad_norm)) {
    std::vector<double> norms;
    for (const auto* p : before)
      if (p->grad_norm && std::isfinite(*p->grad_norm) && *p->grad_norm > 0) norms.push_back(*p->grad_norm);
    if (norms.size() >= 3) {
      std::nth_element(norms.begin(), norms.begin() + static_cast<long>(norms.size() / 2), norms.end());
      const double median = norms[norms.size() / 2];
      if (*s.grad_norm >= t.grad_norm_spike * median) {
        Finding f = analysis::finding_of(model::Code::GradientNormSpike);
        f.message = "The gradient norm " + number(*s.grad_norm) + " is " + number(*s.grad_norm / median) +
                    " times the median of the earlier snapshots (" + number(median) + "): a loss spike.";
        f.evidence = {{"grad_norm", *s.grad_norm}, {"median", median}};
        out.push_back(std::move(f));
      }
    }
  }
  for (const auto& f : out) note(s, f);
  points_.push_back(std::move(s));
  std::stable_sort(points_.begin(), points_.end(), [](const SnapshotSummary& a, const SnapshotSummary& b) {
    return std::tie(a.global_steps, a.created_unix) < std::tie(b.global_steps, b.created_unix);
  });
  return out;
}

void Timeline::mark_deleted(const std::string& dir) {
  for (auto& p : points_)
    if (p.dir == dir) p.deleted = true;
}

std::vector<std::pair<int64_t, double>> Timeline::param_series(const std::string& name,
                                                               const std::string& metric) const {
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& p : points_) {
    auto it = p.params.find(name);
    if (it == p.params.end()) continue;
    const ParamPoint& pt = it->second;
    const double v = metric == "exact_fraction" ? pt.exact_fraction
                     : metric == "rel_l2"       ? pt.rel_l2
                     : metric == "max_abs"      ? pt.max_abs
                                                : static_cast<double>(pt.nonfinite);
    if (!std::isnan(v)) out.emplace_back(p.global_steps, v);
  }
  return out;
}

}  // namespace ckptdoc::snapshot
