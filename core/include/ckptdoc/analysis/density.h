#pragma once
// A 2-D histogram of (x[i], y[i]) pairs for density plots that show every element of a param rather than
// a sample: weight vs fp32 master, where a healthy param is a thin line on the diagonal and stale masters
// are a cloud. Both axes share one range so the diagonal stays the diagonal.
#include <cstdint>
#include <span>
#include <vector>

namespace ckptdoc::analysis {

struct Density2D {
  int bins = 0;                  // per axis
  double lo = 0, hi = 0;         // both axes cover [lo, hi]
  std::vector<uint64_t> counts;  // bins * bins, counts[iy * bins + ix]
  uint64_t pairs = 0;            // finite pairs counted
  uint64_t nonfinite = 0;        // pairs with NaN/Inf on either side, left out
  uint64_t max_count = 0;

  uint64_t at(int ix, int iy) const { return counts[static_cast<size_t>(iy) * bins + ix]; }
  double center(int i) const { return lo + (hi - lo) * (i + 0.5) / bins; }
};

// Pairs up to the shorter of x and y; bins >= 1. When every finite value is equal the range is widened by
// one unit around it.
Density2D density_2d(std::span<const float> x, std::span<const float> y, int bins);

}  // namespace ckptdoc::analysis
