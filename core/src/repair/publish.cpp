// publish_folder and verify_output (see publish.h): shared by the single-process and the MPI repair.
#include "repair/publish.h"

#include <algorithm>
#include <filesystem>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "repair/runner.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {

void remove_tree_quietly(const std::string& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

void publish_folder(const std::string& partial, const std::string& out, FileIo& io, bool& renamed) {
  std::error_code ec;
  if (fs::exists(out, ec)) {
    // make_plan allowed it: empty, or --force.
    fs::remove_all(out, ec);
    if (ec) throw Error(out, "", "cannot replace the existing output: " + ec.message());
  }
  check_io(io.rename(partial, out), out, "rename");
  renamed = true;
  fs::path parent = fs::path(out).parent_path();
  check_io(io.fsync_dir(parent.empty() ? std::string(".") : parent.string()), parent.string(), "fsync of directory");
}

void verify_output(RepairResult& result, const RepairRequest& rq, Progress* progress, bool only_present_files) {
  auto written = deepspeed::Checkpoint::open(result.output);
  analysis::DiagnoseOptions dopt;
  dopt.device = rq.device;
  if (progress) progress->set_stage("verifying", 0);
  result.verification = analysis::diagnose(*written, dopt, progress);
  // With --allow-unsafe-pickle the output carries the input's pickles on purpose: still listed, not a failure.
  result.verified_clean = std::none_of(
      result.verification.findings.begin(), result.verification.findings.end(), [&](const analysis::Finding& f) {
        return f.severity == analysis::Severity::Error && !(rq.allow_unsafe_pickle && f.code == "unsafe-pickle");
      });
  result.invariant_failures = check_loader_invariants(*written, only_present_files);
}

}  // namespace ckptdoc::repair::detail
