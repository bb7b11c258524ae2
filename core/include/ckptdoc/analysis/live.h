#pragma once
// The findings a live engine's numbers support (a LiveReport, which a source fills from a snapshot:
// sources/deepspeed/live_report.h): non-finite gradients, a gradient norm far from the clip value, a loss
// scale at its floor, a step that overflowed.
#include <vector>

#include "ckptdoc/analysis/report.h"

namespace ckptdoc::analysis {

// Thresholds of the live findings (documented in docs/snapshot-format.md).
struct LiveThresholds {
  double clip_ratio =
      10.0;  // gradient norm at least this many times the clip value: every update is cut hard
};

std::vector<analysis::Finding> live_findings(const analysis::LiveReport& live,
                                             const LiveThresholds& thresholds = {});

}  // namespace ckptdoc::analysis
