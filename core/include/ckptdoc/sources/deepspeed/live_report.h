#pragma once
// What only a live engine shows, read from a DeepSpeed snapshot: the engine's numbers at the dump and the
// recorded gradients' norm and NaN/Inf (per param). Here and not in analysis/ because it reads a
// deepspeed::Checkpoint; the findings on the numbers are analysis::live_findings (analysis/live.h).
#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/deepspeed/open_options.h"  // Checkpoint

namespace ckptdoc::deepspeed {

// Reads the engine's numbers from the manifest and scans the recorded gradients (one pass, in blocks).
// Requires ckpt.snapshot().
analysis::LiveReport live_report(const Checkpoint& ckpt);

}  // namespace ckptdoc::deepspeed
