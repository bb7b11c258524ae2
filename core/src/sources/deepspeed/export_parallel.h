#pragma once
// Export of a tensor/pipeline-parallel job (export.h): every pipeline stage, one tensor rank's slices or all
// of them merged by the tensor-parallel rules.
#include <vector>

#include "ckptdoc/sources/deepspeed/export.h"

namespace ckptdoc::deepspeed::detail {

// One model-parallel rank's tensors (a data-parallel job's whole model): zero_to_fp32.py's list.
std::vector<NamedTensor> slice_export_tensors(const Checkpoint& ckpt, const ExportOptions& options);
// The whole job (ckpt opened as the job). `notes` receives which copy of a differing replicated param was
// taken.
std::vector<NamedTensor> job_export_tensors(const Checkpoint& job, const ExportOptions& options,
                                            std::vector<std::string>* notes);

}  // namespace ckptdoc::deepspeed::detail
