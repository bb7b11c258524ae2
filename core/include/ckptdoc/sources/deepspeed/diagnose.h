#pragma once
// Diagnoses a DeepSpeed checkpoint: one streaming, multi-threaded pass over every trainable param computes
// lp-vs-fp32 divergence and value/moment statistics on a compute backend, then the finding rules
// (analysis/) turn the numbers and the catalog's problems into named findings. Here and not in analysis/
// because it reads a deepspeed::Checkpoint; analysis/ holds the options, the rules and the report.
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/deepspeed/open_options.h"  // Checkpoint
#include "ckptdoc/task/progress.h"

namespace ckptdoc::deepspeed {

// Throws Cancelled when progress->cancel() was called. A tensor/pipeline-parallel job (ckpt opened as the
// job) is diagnosed model-parallel rank by model-parallel rank, every finding carrying its coordinates, plus
// what only the ranks side by side show (tp-replicated-mismatch and the catalog's job problems).
analysis::Report diagnose(const Checkpoint& ckpt, const analysis::DiagnoseOptions& options = {},
                          Progress* progress = nullptr);

}  // namespace ckptdoc::deepspeed
