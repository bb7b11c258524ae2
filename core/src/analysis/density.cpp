#include "ckptdoc/analysis/density.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "ckptdoc/error.h"

namespace ckptdoc::analysis {

Density2D density_2d(std::span<const float> x, std::span<const float> y, int bins) {
  if (bins < 1) throw Error(ErrorKind::InvalidRequest, "", "density_2d", "bins must be at least 1");
  Density2D d;
  d.bins = bins;
  d.counts.assign(static_cast<size_t>(bins) * static_cast<size_t>(bins), 0);
  const size_t n = std::min(x.size(), y.size());
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      ++d.nonfinite;
      continue;
    }
    lo = std::min({lo, static_cast<double>(x[i]), static_cast<double>(y[i])});
    hi = std::max({hi, static_cast<double>(x[i]), static_cast<double>(y[i])});
  }
  if (lo > hi) return d;  // no finite pair
  if (hi == lo) {
    lo -= 1;
    hi += 1;
  }
  d.lo = lo;
  d.hi = hi;
  const double scale = bins / (hi - lo);
  auto bin = [&](float v) {
    return std::clamp(static_cast<int>((v - lo) * scale), 0, bins - 1);
  };  // hi: last bin
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
    ++d.counts[static_cast<size_t>(bin(y[i])) * bins + bin(x[i])];
    ++d.pairs;
  }
  d.max_count = *std::max_element(d.counts.begin(), d.counts.end());
  return d;
}

}  // namespace ckptdoc::analysis
