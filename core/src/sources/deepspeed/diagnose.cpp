// deepspeed::diagnose (sources/deepspeed/diagnose.h): the scan, the rules of analysis/ on its numbers, and
// the checks only a DeepSpeed checkpoint has (a tensor-parallel job, ZeRO-3's 16-bit weights saved elsewhere,
// a live snapshot).
#include "ckptdoc/sources/deepspeed/diagnose.h"

#include <algorithm>
#include <chrono>

#include "analysis/not_analysed.h"
#include "analysis/rules.h"
#include "analysis/weights_diagnose.h"
#include "ckptdoc/analysis/live.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/live_report.h"
#include "ckptdoc/weights/weights_source.h"
#include "sources/deepspeed/checksums.h"
#include "sources/deepspeed/lp_source_compare.h"
#include "sources/deepspeed/module_weights_scan.h"
#include "sources/deepspeed/problem_merge.h"
#include "sources/deepspeed/scan_params.h"
#include "sources/deepspeed/tp_consistency.h"

namespace ckptdoc::deepspeed {

using analysis::apply_rules;
using analysis::diagnose_weights;
using analysis::DiagnoseOptions;
using analysis::Finding;
using analysis::finding_of;
using analysis::live_findings;
using analysis::not_analysed_findings;
using analysis::NotAnalysed;
using analysis::Report;
using analysis::RuleSet;
using detail::has_only_module_weights;
using detail::scan_module_weights;
using detail::scan_params;
using detail::ScanResult;
using detail::tp_consistency_findings;

namespace {

RuleSet rule_set(const DiagnoseOptions& o) {
  return o.masters_only ? RuleSet::MastersOnly : RuleSet::All;
}

void sort_findings(std::vector<Finding>& f) {
  std::stable_sort(f.begin(), f.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
}

// A tensor/pipeline-parallel job: every model-parallel rank scanned and judged on its own (its findings carry
// its coordinates), the job's catalog problems once, and the comparison of replicated params across tensor
// ranks.
Report diagnose_job(const deepspeed::Checkpoint& job, const DiagnoseOptions& options, Progress* progress) {
  if (mpi_size() > 1)
    throw Error(ErrorKind::Unsupported, job.catalog().tag_dir, "mpirun",
                "diagnosing a tensor/pipeline-parallel checkpoint across MPI processes is not supported; run "
                "ckptdoc diagnose in one process");
  Report report;
  std::vector<deepspeed::Problem> scan_problems;
  NotAnalysed not_analysed;  // over every slice
  for (int m = 0; m < job.slice_count(); ++m) {
    std::shared_ptr<const deepspeed::Checkpoint> slice;
    try {
      slice = job.slice(m);
    } catch (const Error&) {
      continue;  // unreadable: the job's catalog problems say so
    }
    const model::Catalog& c = slice->catalog();
    ScanResult scan = scan_params(*slice, options, progress);
    slice->check_unchanged();  // a rank file that shrank while scanned read as zeros: no report from that
    for (const auto& [reason, n] : scan.not_analysed) not_analysed[reason] += n;
    // The slice's catalog problems are in the job's list already; the rules here judge its numbers.
    model::Catalog judged = c;
    judged.problems.clear();
    const std::string label = c.slice_label() + ": ";
    for (auto& f : apply_rules(judged, scan.params, scan.problems, rule_set(options))) {
      f.pp = c.pp_stage;
      f.tp = c.tp_rank;
      f.message = label + f.message;
      report.findings.push_back(std::move(f));
    }
    for (auto& p : scan.params) {
      p.pp = c.pp_stage;
      p.tp = c.tp_rank;
      report.params.push_back(std::move(p));
    }
    report.bytes_scanned += scan.bytes_scanned;
    if (report.backend.empty()) report.backend = scan.backend;
  }
  for (const auto& p : job.catalog().problems) report.findings.push_back(p);
  if (options.verify_checksums)
    for (auto& p : deepspeed::detail::verify_checksums(job.catalog(), options.threads, progress))
      report.findings.push_back(std::move(p));
  const std::optional<deepspeed::TpRules> rules =
      options.tp_rules ? std::optional<deepspeed::TpRules>(deepspeed::read_tp_rules(*options.tp_rules))
                       : deepspeed::tp_rules_of(job);
  if (!options.masters_only)
    for (auto& f : tp_consistency_findings(job, rules, progress)) report.findings.push_back(std::move(f));
  for (auto& f : not_analysed_findings(not_analysed)) report.findings.push_back(std::move(f));
  sort_findings(report.findings);
  return report;
}

// ZeRO-3: the fp32 partitions against 16-bit weights saved elsewhere (--lp-source), or beside the checkpoint.
void compare_zero3_with_lp_weights(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options,
                                   Report& report) {
  if (!ckpt.catalog().lp_weights_elsewhere) {
    if (options.lp_source)
      throw Error(
          ErrorKind::InvalidRequest, *options.lp_source, "--lp-source",
          "only ZeRO-3 checkpoints are compared with 16-bit weights saved elsewhere; this one keeps its own");
    return;
  }
  const bool beside = !options.lp_source && ckpt.weights();
  if (!options.lp_source && !beside) return;
  // AutoEP: each expert param is one expert-parallel rank's rows of a whole tensor there; not matched yet
  if (!ckpt.catalog().compares_lp_source) {
    if (options.lp_source)
      throw Error(ErrorKind::Unsupported, *options.lp_source, "--lp-source",
                  "an AutoEP checkpoint's masters are not compared with 16-bit weights saved elsewhere yet "
                  "(its experts are split over the expert-parallel ranks)");
    return;
  }
  const std::string source = beside ? ckpt.weights()->path() : *options.lp_source;
  try {
    detail::compare_with_lp_source(ckpt, source, beside, report);
  } catch (const Error& e) {
    if (!beside) throw;
    Finding f =
        finding_of(model::Code::LpSourceIncomplete);  // weights beside that cannot be compared: not fatal
    f.message = "the 16-bit weights beside the checkpoint (" + source +
                ") could not be compared with the fp32 "
                "partitions: " +
                e.what();
    f.files = {source};
    report.findings.push_back(std::move(f));
  }
  std::stable_sort(report.findings.begin(), report.findings.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
}

}  // namespace

Report diagnose(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options, Progress* progress) {
  if (ckpt.weights_only() && ckpt.weights()) return diagnose_weights(*ckpt.weights(), options, progress);
  const auto start = std::chrono::steady_clock::now();
  if (ckpt.slice_count() > 1 && ckpt.catalog().mp_rank == 0) {
    Report report = diagnose_job(ckpt, options, progress);
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return report;
  }
  const uint64_t changes = MappedFile::change_count();
  ScanResult scan = scan_params(ckpt, options, progress);
  // No optimizer state, so no group: the module's weights in the model file are what there is to read.
  std::optional<Report> module_only;
  // One process reads the one model file.
  if (!options.masters_only && has_only_module_weights(ckpt) && mpi_size() <= 1) {
    module_only = scan_module_weights(ckpt, options, progress);
    scan.bytes_scanned += module_only->bytes_scanned;
    if (scan.backend.empty()) scan.backend = module_only->backend;
  }
  if (options.verify_checksums)
    for (auto& p : deepspeed::detail::verify_checksums(ckpt.catalog(), options.threads, progress))
      scan.problems.push_back(std::move(p));
  // A rank file that shrank while it was scanned read as zeros past its new end: no report from that.
  ckpt.check_unchanged();
  if (MappedFile::change_count() != changes) MappedFile::throw_changed("diagnose");
  Report report;
  if (mpi_size() > 1) {
    // Each process saw its own files: the problems of all, with ranks on another process not missing.
    report.findings = apply_rules(deepspeed::detail::merged_across_processes(ckpt.catalog(), scan.problems),
                                  scan.params, {}, rule_set(options));
  } else {
    report.findings = apply_rules(ckpt.catalog(), scan.params, scan.problems, rule_set(options));
  }
  if (ckpt.weights() && !options.masters_only) {
    // A Trainer checkpoint-N/ folder: the model weights saved beside the DeepSpeed files are checked too.
    Report beside = diagnose_weights(*ckpt.weights(), options, progress);
    for (auto& f : beside.findings) {
      f.message = "model weights beside the checkpoint: " + f.message;
      report.findings.push_back(std::move(f));
    }
    scan.bytes_scanned += beside.bytes_scanned;
  }
  if (module_only) {
    for (auto& f : module_only->findings) report.findings.push_back(std::move(f));
    for (auto& p : module_only->params) scan.params.push_back(std::move(p));
  }
  // A live engine's snapshot: its gradients, grad norm and loss scale.
  if (ckpt.snapshot() && !options.masters_only) {
    report.live = live_report(ckpt);
    for (auto& f : live_findings(*report.live)) report.findings.push_back(std::move(f));
  }
  // Every element not analysed is counted (a warning where data was skipped, info where there is nothing to
  // compare).
  for (auto& f : not_analysed_findings(scan.not_analysed)) report.findings.push_back(std::move(f));
  std::stable_sort(report.findings.begin(), report.findings.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  report.params = std::move(scan.params);
  compare_zero3_with_lp_weights(ckpt, options, report);
  report.backend = std::move(scan.backend);
  report.devices = std::move(scan.devices);
  report.bytes_scanned = scan.bytes_scanned;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace ckptdoc::deepspeed
