#pragma once
// What only a live engine shows, from a snapshot: the engine's numbers at the dump, the recorded gradients'
// norm and NaN/Inf (per param), and the findings they support: non-finite gradients, a gradient norm far from
// the clip value, a loss scale at its floor, a step that overflowed.
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/deepspeed/open_options.h"  // Checkpoint

namespace ckptdoc::analysis {

// Thresholds of the live findings (documented in docs/snapshot-format.md).
struct LiveThresholds {
  double clip_ratio =
      10.0;  // gradient norm at least this many times the clip value: every update is cut hard
};

// Reads the engine's numbers from the manifest and scans the recorded gradients (one pass, in blocks).
// Requires ckpt.snapshot().
analysis::LiveReport live_report(const deepspeed::Checkpoint& ckpt);

std::vector<analysis::Finding> live_findings(const analysis::LiveReport& live,
                                             const LiveThresholds& thresholds = {});

}  // namespace ckptdoc::analysis
