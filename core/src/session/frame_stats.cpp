#include "ckptdoc/session/frame_stats.h"

#include <algorithm>

namespace ckptdoc::session {

FrameStats frame_stats(std::vector<double> times) {
  FrameStats s;
  if (times.empty()) return s;
  std::sort(times.begin(), times.end());
  s.median = times[times.size() / 2];
  s.p95 = times[std::min(times.size() - 1, times.size() * 95 / 100)];
  s.max = times.back();
  return s;
}

}  // namespace ckptdoc::session
