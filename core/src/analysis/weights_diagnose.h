#pragma once
// Diagnosis of a weights-only source (a Hugging Face folder or a weights file): its structural problems
// (index vs shards, placeholders, mixed dtypes) and one multi-threaded pass over every floating tensor's
// bytes for NaN/Inf and all-zero weight matrices. Each tensor becomes a row of the report's params (its dtype
// as the lp dtype, its values as the lp statistics), so front ends show weights folders like checkpoints.
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/weights/weights_source.h"

namespace ckptdoc::analysis {

// One named tensor to scan, and the file (relative to the source's folder) that holds it.
struct TensorToScan {
  std::string name;
  Tensor tensor;
  std::string file;
};

// The value pass and its findings (nonfinite-values, all-zero-weights) over any list of named tensors: a
// weights source's, or a DeepSpeed model file's module when no optimizer state lists the trainable params.
// Throws Cancelled when progress->cancel() was called.
analysis::Report diagnose_tensors(const std::vector<TensorToScan>& tensors,
                                  const analysis::DiagnoseOptions& options, Progress* progress);

// Throws Cancelled when progress->cancel() was called.
analysis::Report diagnose_weights(const weights::WeightsSource& source,
                                  const analysis::DiagnoseOptions& options = {},
                                  Progress* progress = nullptr);

}  // namespace ckptdoc::analysis
