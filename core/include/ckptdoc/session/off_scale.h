#pragma once
// The "elements off per rank" chart's scale, shared by both views: per dp rank the share of elements whose
// 16-bit weight is not its fp32 master rounded, on a log scale up to 1 (all off). On a linear 0-100 % axis a
// rank 0.013 % off (or 0.013 % exact) is a bar under one pixel; here every decade gets the same height.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/compute/statistics.h"

namespace ckptdoc::session {

double off_fraction(const DivergenceStats& d);  // 1 - exact fraction; 0 without elements

struct OffScale {
  int low_decade = -6;  // the axis' bottom is 10^low_decade of the elements
  // One decade below the smallest non-zero share (never below -9); -6 when no rank is off.
  static OffScale fit(const std::map<int, DivergenceStats>& per_rank);
  double top() const { return -low_decade; }  // the axis' height in decades
  // A bar's height in decades above the bottom: 0 when nothing is off, else at least a sliver (5 % of a
  // decade).
  double height(double off) const;
  // One tick per decade: (height, "0.01%"), bottom to top.
  std::vector<std::pair<double, std::string>> ticks() const;
};

}  // namespace ckptdoc::session
