#include "ckptdoc/analysis/diagnose.h"

#include <chrono>

#include <algorithm>

#include "checksums.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/snapshot/live.h"
#include "problem_merge.h"
#include "rules.h"
#include "scan.h"

namespace ckptdoc::analysis {

Report diagnose(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options, Progress* progress) {
  const auto start = std::chrono::steady_clock::now();
  ScanResult scan = scan_params(ckpt, options, progress);
  if (options.verify_checksums)
    for (auto& p : verify_checksums(ckpt.catalog(), options.threads, progress)) scan.problems.push_back(std::move(p));
  Report report;
  if (mpi_size() > 1) {
    // Each process saw its own files: the problems of all, with ranks on another process not missing.
    deepspeed::Catalog merged = ckpt.catalog();
    merge_catalog_across_processes(merged, scan.problems);
    report.findings = apply_rules(merged, scan.params, {});
  } else {
    report.findings = apply_rules(ckpt.catalog(), scan.params, scan.problems);
  }
  if (ckpt.snapshot()) {  // a live engine's snapshot: its gradients, grad norm and loss scale
    report.live = snapshot::live_report(ckpt);
    for (auto& f : snapshot::live_findings(*report.live)) report.findings.push_back(std::move(f));
    std::stable_sort(report.findings.begin(), report.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
  }
  report.params = std::move(scan.params);
  report.backend = std::move(scan.backend);
  report.devices = std::move(scan.devices);
  report.bytes_scanned = scan.bytes_scanned;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace ckptdoc::analysis
