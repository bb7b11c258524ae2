#pragma once
// The warning every export prints (the DeepSpeed and the DCP one) when a written tensor holds NaN or Inf.
#include "ckptdoc/sources/deepspeed/export_options.h"

namespace ckptdoc::cli {

// Says on stderr, whatever --quiet or --json say, which written tensors hold NaN or Inf.
void warn_non_finite(const deepspeed::ExportResult& r);

}  // namespace ckptdoc::cli
