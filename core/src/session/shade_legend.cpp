#include "ckptdoc/session/shade_legend.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "ckptdoc/model/finding_codes.h"

namespace ckptdoc::session {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

int severity_rank(analysis::Severity s) {
  return s == analysis::Severity::Error ? 0 : s == analysis::Severity::Warning ? 1 : 2;
}

// The shade that shows a finding, or Param for findings no shade shows (topology, loss scale, files).
Shade shade_of(const std::string& code) {
  if (code == model::code_name(model::Code::Fp32MasterMismatch) ||
      code == model::code_name(model::Code::Fp32MasterDrift))
    return Shade::ExactFraction;
  if (code == model::code_name(model::Code::NonfiniteValues)) return Shade::NonFinite;
  // Lost, zeroed or mis-sized moments: a rank without them shows "no moments", zeros show red.
  if (code == model::code_name(model::Code::OptimizerStepInconsistent) ||
      code == model::code_name(model::Code::NewParamsZeroMoments) ||
      code == model::code_name(model::Code::OptimizerStateMissing) ||
      code == model::code_name(model::Code::OptimizerStateIncomplete) ||
      code == model::code_name(model::Code::OptimizerStateShapeMismatch))
    return Shade::MomentMagnitude;
  return Shade::Param;
}

std::string number(float x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", static_cast<double>(x));
  return buf;
}

Legend health_legend(Shade shade, const HealthMap* health, bool whole_param) {
  Legend l;
  switch (shade) {
    case Shade::Param:
      l.title = "Param: each param its own colour (hover for its name)";
      return l;
    case Shade::ExactFraction:
      // Levels from exact_level (pictures.cpp): log10 of the share off, 1e-6 → 0, all → 1.
      l.title = "Exact fraction: elements where the 16-bit weight equals its fp32 master rounded";
      l.entries = {{shade_rgba(shade, 0, false), "all exact"},
                   {shade_rgba(shade, 0.15f, false), "1e-6 off"},
                   {shade_rgba(shade, 0.5f, false), "0.1% off"},
                   {shade_rgba(shade, 1, false), "all off"},
                   {shade_rgba(shade, kNaN, false), "no weight/master pair"}};
      break;
    case Shade::NonFinite:
      l.title = "NaN/Inf: non-finite elements in weight, master or moments";
      l.entries = {{shade_rgba(shade, 0, false), "none"}, {shade_rgba(shade, 0.75f, false), "one"}};
      if (!health || health->max_nonfinite() > 1)  // the red end stands for the most any fragment has
        l.entries.push_back({shade_rgba(shade, 1, false),
                             health ? "most (" + std::to_string(health->max_nonfinite()) + ")" : "most"});
      break;
    case Shade::MomentMagnitude: {
      // Relative to this checkpoint's own range (at least two decades, HealthMap::build): what stands out is
      // red (exactly zero) or a fragment far darker than its param's other ranks.
      l.title = "Moment magnitude: sqrt(mean exp_avg_sq), log scale over this checkpoint";
      std::string lo = "smallest", hi = "largest";
      if (health) {
        const auto [a, b] = health->moment_range(whole_param);
        lo = number(a);
        hi = number(b);
      }
      l.entries = {{shade_rgba(shade, 0.01f, false), lo},
                   {shade_rgba(shade, 0.5f, false), "middle"},
                   {shade_rgba(shade, 1, false), hi},
                   {kZeroMomentRgba, "exactly zero"},
                   {shade_rgba(shade, kNaN, false), "no moments"}};
      break;
    }
  }
  if (!health) l.title += " (analyse first)";
  return l;
}

}  // namespace

Shade shade_for(const std::vector<analysis::Finding>& findings) {
  Shade best = Shade::Param;
  int best_rank = 2;  // info findings never win
  for (const auto& f : findings) {
    const Shade s = shade_of(f.code);
    const int r = severity_rank(f.severity);
    if (s != Shade::Param && r < best_rank) {
      best = s;
      best_rank = r;
    }
  }
  return best;
}

Legend shade_legend(Shade shade, const HealthMap* health) {
  return health_legend(shade, health, false);
}

Legend strip_lane_legend(StripLane lane, const HealthMap* health) {
  const Shade shade = lane == StripLane::Divergence ? Shade::ExactFraction
                      : lane == StripLane::Moments  ? Shade::MomentMagnitude
                                                    : Shade::NonFinite;
  return health_legend(shade, health, true);
}

}  // namespace ckptdoc::session
