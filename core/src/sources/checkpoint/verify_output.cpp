// verify_output (see verify_output.h): re-opens a written DeepSpeed checkpoint, so it lives with DeepSpeed's
// source; shared by the single-process and the MPI repair.
#include "sources/checkpoint/verify_output.h"

#include <algorithm>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"

namespace ckptdoc::repair::detail {

void verify_output(RepairResult& result, const RepairRequest& rq, Progress* progress,
                   bool only_present_files) {
  try {
    auto written = deepspeed::Checkpoint::open(result.output);
    analysis::DiagnoseOptions dopt;
    dopt.device = rq.device;
    if (progress) progress->set_stage("verifying", 0);
    result.verification = deepspeed::diagnose(*written, dopt, progress);
    result.invariant_failures = check_loader_invariants(*written, only_present_files);
    result.output_catalog = written->catalog();
  } catch (const Cancelled&) {
    result.state = OutputState::VerificationIncomplete;
    result.verification_cancelled = true;
    result.verification_error = "the verification was cancelled";
    return;
  } catch (const std::exception& e) {
    result.state = OutputState::VerificationIncomplete;
    result.verification_error = e.what();
    return;
  }
  result.state = OutputState::Verified;
  // With --allow-unsafe-pickle the output carries the input's pickles on purpose: still listed, not a
  // failure.
  result.verified_clean = std::none_of(
      result.verification.findings.begin(), result.verification.findings.end(),
      [&](const analysis::Finding& f) {
        return f.severity == analysis::Severity::Error &&
               !(rq.allow_unsafe_pickle && f.code == model::code_name(model::Code::UnsafePickle));
      });
}

}  // namespace ckptdoc::repair::detail
