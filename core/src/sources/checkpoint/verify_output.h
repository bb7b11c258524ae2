#pragma once
// The check every DeepSpeed repair ends with, once the output is in place (repair/publish.h): the output
// re-opened as a DeepSpeed checkpoint, re-diagnosed and checked against DeepSpeed's loader invariants.
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::repair::detail {

// Re-opens result.output, re-diagnoses it and checks DeepSpeed's loader invariants (only the files present
// when `only_present_files`: a node's share on node-local storage). Never throws: a cancel or an error leaves
// result.state VerificationIncomplete with the reason, since the output is already in place.
void verify_output(RepairResult& result, const RepairRequest& rq, Progress* progress,
                   bool only_present_files);

}  // namespace ckptdoc::repair::detail
