// `ckptdoc diagnose PATH`: findings first, then a per-param table worst first. Exit 0 clean, 1 when an
// error-level finding exists, 2 on unusable input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/analysis/verdict.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/registry.h"
#include "commands.h"
#include "device_choice.h"
#include "format_helpers.h"
#include "keep_until_exit.h"
#include "progress_bar.h"

namespace ckptdoc::cli {
namespace {

const char* marker(analysis::Severity s) {
  switch (s) {
    case analysis::Severity::Error:
      return "ERROR  ";
    case analysis::Severity::Warning:
      return "WARNING";
    default:
      return "info   ";
  }
}

std::string fmt_double(double v, const char* f = "%.3g") {
  if (!std::isfinite(v)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The verdict and what it rests on, before the findings: "No problems found" only after comparing something.
void print_verdict(const analysis::Report& report, const model::Catalog& cat) {
  const analysis::Verdict v = analysis::verdict_of(report, cat);
  std::printf("%s Checked: %s.\n", v.headline.c_str(), v.basis.c_str());
  for (const auto& n : v.not_checked) std::printf("Not checked: %s.\n", n.c_str());
  std::printf("\n");
}

// A weights-only source: findings, then every tensor's values (worst first: NaN/Inf, all zeros).
void print_weights_report(const analysis::Report& report, const model::Catalog& cat, int max_params) {
  std::printf("ckptdoc diagnose: %s (%s, %zu tensors)\n", cat.tag_dir.c_str(), cat.kind.c_str(),
              report.params.size());
  std::printf("  scanned %s in %.2f s on %s\n\n", human_bytes(report.bytes_scanned).c_str(), report.seconds,
              report.backend.c_str());
  print_verdict(report, cat);
  for (const auto& f : report.findings)
    std::printf("%s %s\n  %s\n\n", marker(f.severity), f.code.c_str(), f.message.c_str());
  std::vector<const analysis::ParamReport*> rows;
  for (const auto& p : report.params) rows.push_back(&p);
  auto badness = [](const analysis::ParamReport* p) {
    if (!p->lp) return 0;
    if (p->lp->finite_count() != p->lp->count) return 2;
    return p->lp->count > 0 && p->lp->zeros == p->lp->count ? 1 : 0;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](auto* a, auto* b) { return badness(a) > badness(b); });
  std::printf("%-44s %-9s %12s %11s %11s %11s %8s\n", "tensor (worst first)", "dtype", "numel", "min", "max",
              "rms", "NaN/Inf");
  int shown = 0;
  for (const auto* p : rows) {
    if (shown++ >= max_params) {
      std::printf("… %zu more tensors (use --json for all)\n", rows.size() - static_cast<size_t>(max_params));
      break;
    }
    const std::string name = fit_column("", p->name, 44);
    std::printf("%s %-9s %12lld %11s %11s %11s %8s\n", name.c_str(),
                std::string(dtype_name(p->lp_dtype)).c_str(), static_cast<long long>(p->numel),
                p->lp ? fmt_double(p->lp->min).c_str() : "-", p->lp ? fmt_double(p->lp->max).c_str() : "-",
                p->lp ? fmt_double(p->lp->rms()).c_str() : "-",
                p->lp ? std::to_string(p->lp->count - p->lp->finite_count()).c_str() : "-");
  }
}

// A live-engine snapshot's own numbers (ckptdoc_hook): what no checkpoint on disk records.
void print_live(const analysis::LiveReport& l) {
  auto opt = [](const std::optional<double>& v) { return v ? fmt_double(*v, "%.4g") : std::string("-"); };
  std::printf("  live engine at step %lld (%lld skipped): grad norm %s (clip %s), loss scale %s, lr %s\n",
              static_cast<long long>(l.global_steps), static_cast<long long>(l.skipped_steps),
              opt(l.grad_norm).c_str(), opt(l.gradient_clipping).c_str(), opt(l.loss_scale).c_str(),
              l.lr.empty() ? "-" : opt(l.lr.front()).c_str());
  if (l.grads_present)
    std::printf("  gradients recorded: %llu elements, norm %s, %llu NaN/Inf\n",
                static_cast<unsigned long long>(l.grad_numel), opt(l.recorded_grad_norm).c_str(),
                static_cast<unsigned long long>(l.grad_nonfinite));
  else if (l.grads_requested)
    std::printf("  gradients: none (the dump ran outside backward()..step())\n");
}

void print_report(const analysis::Report& report, const model::Catalog& cat, int max_params) {
  if (cat.weights_only) return print_weights_report(report, cat, max_params);
  std::printf("ckptdoc diagnose: %s (tag %s)\n", cat.tag_dir.c_str(), cat.tag.c_str());
  const auto& t = cat.topology;
  std::string par = cat.dp_independent ? "universal (any dp)" : "dp " + std::to_string(cat.dp_world_size);
  if (t.model_parallel()) par = "pp " + std::to_string(t.pp) + " x tp " + std::to_string(t.tp) + " x " + par;
  if (t.moe()) par += ", ep " + std::to_string(t.ep);
  // A training checkpoint (weights sources went above): partitioning_text is its "ZeRO stage N".
  std::printf("  %s, %s weights, %s, %s; scanned %s in %.2f s on %s\n\n", cat.partitioning_text.c_str(),
              std::string(dtype_name(cat.lp_dtype)).c_str(), par.c_str(), cat.optimizer_class.c_str(),
              human_bytes(report.bytes_scanned).c_str(), report.seconds, report.backend.c_str());
  if (report.live) print_live(*report.live);
  for (size_t d = 0; d < report.devices.size(); ++d) {
    const auto& share = report.devices[d];
    std::string ranks;
    for (int r : share.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    std::printf("  worker %zu: %s: dp ranks %s (%s)\n", d, share.backend.c_str(),
                ranks.empty() ? "-" : ranks.c_str(), human_bytes(share.bytes).c_str());
  }
  if (!report.devices.empty()) std::printf("\n");
  print_verdict(report, cat);
  for (const auto& f : report.findings) {
    std::printf("%s %s\n  %s\n", marker(f.severity), f.code.c_str(), f.message.c_str());
    if (!f.ranks.empty()) {
      std::string r;
      for (int x : f.ranks) r += (r.empty() ? "" : ", ") + std::to_string(x);
      std::printf("  %s: %s\n",
                  f.code.rfind("tp-", 0) == 0 ? "tensor ranks"
                  : t.model_parallel()        ? "dp ranks"
                                              : "ranks",
                  r.c_str());
    }
    // The flags the planner accepted (repair::settle_fixes); a finding without them has no fix that runs.
    const auto fix = f.details.find("fix");
    const std::string flags = fix != f.details.end() ? fix->second
                              : f.repair != analysis::RepairKind::None
                                  ? "--" + std::string(analysis::repair_name(f.repair))
                                  : std::string();
    if (!flags.empty())
      std::printf("  fix: ckptdoc repair %s -o %s-fixed %s\n", cat.save_dir.c_str(), cat.save_dir.c_str(),
                  flags.c_str());
    std::printf("\n");
  }
  std::vector<const analysis::ParamReport*> rows;
  for (const auto& p : report.params) rows.push_back(&p);
  std::stable_sort(rows.begin(), rows.end(),
                   [](auto* a, auto* b) { return a->severity_score() > b->severity_score(); });
  std::printf("%-40s %12s %9s %10s %10s %8s %12s\n", "param (worst first)", "numel", "exact%", "max|d|",
              "rel L2", "NaN/Inf", "exp_avg_sq");
  int shown = 0;
  for (const auto* p : rows) {
    if (shown++ >= max_params) {
      std::printf("… %zu more params (use --json for all)\n", rows.size() - static_cast<size_t>(max_params));
      break;
    }
    uint64_t nonfinite = 0;
    for (const auto& [k, ranks] : p->nonfinite_by_rank)
      for (const auto& [r, n] : ranks) nonfinite += n;
    const auto& d = p->lp_vs_fp32;
    const std::string slice =
        p->pp >= 0 || p->tp >= 0 ? "[" + model::slice_label(t, p->pp, p->tp) + "] " : "";
    const std::string name = fit_column(slice, p->name, 40);
    std::printf("%s %12lld %9s %10s %10s %8llu %12s\n", name.c_str(), static_cast<long long>(p->numel),
                d ? fmt_double(d->exact_fraction() * 100.0, "%.2f").c_str() : "-",
                d ? fmt_double(d->max_abs).c_str() : "-", d ? fmt_double(d->rel_l2()).c_str() : "-",
                static_cast<unsigned long long>(nonfinite),
                p->exp_avg_sq ? fmt_double(p->exp_avg_sq->mean()).c_str() : "-");
  }
}

}  // namespace

int run_diagnose(const DiagnoseOptions& o) {
  if (const auto source = sources::find_source(o.path); !source->reads_into_catalog())
    return run_source_diagnose(*source, o);
  try {
    deepspeed::OpenOptions open;
    open.tag = o.tag;
    const auto ckpt = deepspeed::Checkpoint::open(o.path, open);
    keep_until_exit(ckpt);  // freed by the exit, not value by value
    analysis::DiagnoseOptions d;
    d.device = choose_device(o.device);
    d.threads = o.threads;
    d.gpu_workers = o.gpu_workers;
    d.verify_checksums = o.verify_checksums;
    d.tp_rules = o.tp_rules;
    d.lp_source = o.lp_source;
    Progress progress;
    analysis::Report report;
    {
      std::optional<ProgressBar> bar;
      if (mpi_rank() == 0) bar.emplace(progress);
      report = deepspeed::diagnose(*ckpt, d, &progress);
    }
    if (mpi_rank() != 0) return report.has_error() ? 1 : 0;  // rank 0 prints the merged report
    repair::settle_fixes(*ckpt, report.findings);            // offer only the fixes the planner would run
    if (o.json)
      std::printf("%s\n", analysis::report_json(report, ckpt->catalog()).c_str());
    else
      print_report(report, ckpt->catalog(), o.max_params);
    const int rc = report.has_error() ? 1 : 0;
    keep_until_exit(std::make_shared<const analysis::Report>(std::move(report)));  // 20k param reports
    return rc;
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc diagnose: error [%s]: %s\n", std::string(kind_name(e.kind())).c_str(),
                 e.what());
    return 2;
  }
}

}  // namespace ckptdoc::cli
