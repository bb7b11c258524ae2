#include "ckptdoc/session/off_scale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ckptdoc::session {

double off_fraction(const DivergenceStats& d) {
  return d.count ? 1.0 - d.exact_fraction() : 0.0;
}

OffScale OffScale::fit(const std::map<int, DivergenceStats>& per_rank) {
  double smallest = 1.0;
  bool any = false;
  for (const auto& [rank, d] : per_rank)
    if (const double off = off_fraction(d); off > 0) {
      smallest = std::min(smallest, off);
      any = true;
    }
  OffScale s;
  if (any) s.low_decade = std::clamp(static_cast<int>(std::floor(std::log10(smallest))) - 1, -9, -1);
  return s;
}

double OffScale::height(double off) const {
  if (!(off > 0)) return 0;
  return std::clamp(std::log10(std::min(off, 1.0)) - low_decade, 0.05, top());
}

std::vector<std::pair<double, std::string>> OffScale::ticks() const {
  std::vector<std::pair<double, std::string>> out;
  for (int d = low_decade; d <= 0; ++d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g%%", std::pow(10.0, d + 2));
    out.emplace_back(d - low_decade, buf);
  }
  return out;
}

}  // namespace ckptdoc::session
