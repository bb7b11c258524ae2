#pragma once
// Diagnosis of a weights-only source (a Hugging Face folder or a weights file): its structural problems (index
// vs shards, placeholders, mixed dtypes) and one multi-threaded pass over every floating tensor's bytes for
// NaN/Inf and all-zero weight matrices. Each tensor becomes a row of the report's params (its dtype as the lp
// dtype, its values as the lp statistics), so front ends show weights folders like checkpoints.
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/weights/weights_source.h"

namespace ckptdoc::weights {

// Throws Cancelled when progress->cancel() was called.
analysis::Report diagnose_weights(const WeightsSource& source, const analysis::DiagnoseOptions& options = {},
                                  Progress* progress = nullptr);

}  // namespace ckptdoc::weights
