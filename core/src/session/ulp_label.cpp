#include "ckptdoc/session/ulp_label.h"

#include <algorithm>

#include "ckptdoc/compute/statistics.h"

namespace ckptdoc::session {

std::string ulp_axis_label(int b) {
  if (b <= 0) return "0";
  const int last = UlpHistogram::kBuckets - 1;
  const unsigned lo = 1u << (std::min(b, last) - 1);
  const std::string t = lo >= 1024 ? std::to_string(lo / 1024) + "k" : std::to_string(lo);
  return b >= last ? "\u2265" + t : t;
}

}  // namespace ckptdoc::session
