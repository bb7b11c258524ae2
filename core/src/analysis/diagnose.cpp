#include "ckptdoc/analysis/diagnose.h"

#include <algorithm>
#include <chrono>

#include <algorithm>

#include "checksums.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/weights/weights_diagnose.h"
#include "not_analysed.h"
#include "ckptdoc/snapshot/live.h"
#include "problem_merge.h"
#include "rules.h"
#include "scan.h"

namespace ckptdoc::analysis {

Report diagnose(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options, Progress* progress) {
  if (ckpt.weights_only() && ckpt.weights()) return weights::diagnose_weights(*ckpt.weights(), options, progress);
  const auto start = std::chrono::steady_clock::now();
  const uint64_t changes = MappedFile::change_count();
  ScanResult scan = scan_params(ckpt, options, progress);
  if (options.verify_checksums)
    for (auto& p : verify_checksums(ckpt.catalog(), options.threads, progress)) scan.problems.push_back(std::move(p));
  // A rank file that shrank while it was scanned read as zeros past its new end: no report from that.
  ckpt.check_unchanged();
  if (MappedFile::change_count() != changes) MappedFile::throw_changed("diagnose");
  Report report;
  if (mpi_size() > 1) {
    // Each process saw its own files: the problems of all, with ranks on another process not missing.
    deepspeed::Catalog merged = ckpt.catalog();
    merge_catalog_across_processes(merged, scan.problems);
    report.findings = apply_rules(merged, scan.params, {});
  } else {
    report.findings = apply_rules(ckpt.catalog(), scan.params, scan.problems);
  }
  if (ckpt.weights()) {
    // A Trainer checkpoint-N/ folder: the model weights saved beside the DeepSpeed files are checked too.
    Report beside = weights::diagnose_weights(*ckpt.weights(), options, progress);
    for (auto& f : beside.findings) {
      f.message = "model weights beside the checkpoint: " + f.message;
      report.findings.push_back(std::move(f));
    }
    scan.bytes_scanned += beside.bytes_scanned;
  }
  if (ckpt.snapshot()) {  // a live engine's snapshot: its gradients, grad norm and loss scale
    report.live = snapshot::live_report(ckpt);
    for (auto& f : snapshot::live_findings(*report.live)) report.findings.push_back(std::move(f));
  }
  // Every element not analysed is counted (a warning where data was skipped, info where there is nothing to compare).
  for (auto& f : not_analysed_findings(scan.not_analysed)) report.findings.push_back(std::move(f));
  std::stable_sort(report.findings.begin(), report.findings.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  report.params = std::move(scan.params);
  report.backend = std::move(scan.backend);
  report.devices = std::move(scan.devices);
  report.bytes_scanned = scan.bytes_scanned;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace ckptdoc::analysis
