#pragma once
// The checks of an optimizer file kept beside weights (weights/optimizer_file.h), for a weights folder's
// diagnosis (analysis/weights_diagnose.h): the values are read here, where the compute backends are.
#include <vector>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/model/finding.h"
#include "ckptdoc/task/progress.h"
#include "ckptdoc/weights/optimizer_file.h"

namespace ckptdoc::analysis {

// The checks of one file's state against itself and, by shape, the weights beside it (`weights` empty: no
// comparison). Findings use the code table: optimizer-state-incomplete (a state lacks a key the others hold,
// or its step), optimizer-step-inconsistent (steps differ; moments all zero at step >= 2; negative
// exp_avg_sq), nonfinite-values, optimizer-state-shape-mismatch (moments of different shapes, or a shape no
// weight has), optimizer-state-empty (never stepped). The values are read by diagnose_tensors' pass, under
// `options` and `progress` (throws Cancelled when progress->cancel() was called).
weights::OptimizerFileSummary check_optimizer_file(const weights::OptimizerFile& optimizer,
                                                   const std::vector<NamedTensor>& weights,
                                                   const DiagnoseOptions& options, Progress* progress,
                                                   std::vector<model::Finding>& findings);

}  // namespace ckptdoc::analysis
