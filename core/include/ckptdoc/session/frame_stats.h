#pragma once
// The summary both views' --bench modes print for a run of frame times.
#include <vector>

namespace ckptdoc::session {

struct FrameStats {
  double median = 0, p95 = 0, max = 0;  // in the unit of the times given
};
// All zero for no times.
FrameStats frame_stats(std::vector<double> times);

}  // namespace ckptdoc::session
