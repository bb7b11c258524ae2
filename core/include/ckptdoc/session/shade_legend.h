#pragma once
// Which shade a picture opens with, and what its colours mean. Both views draw these legends as they are, so
// the words and swatches under the Qt map and the ImGui map are the same, and a test can ask for them.
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/session/pictures.h"

namespace ckptdoc::session {

// The shade that shows the worst finding (errors before warnings, then report order) among those a shade can
// show: fp32 masters against the weights → ExactFraction, NaN/Inf → NonFinite, lost or mismatched optimizer
// moments → MomentMagnitude. Param when nothing of the kind was found (info findings never change it).
Shade shade_for(const std::vector<analysis::Finding>& findings);

struct LegendEntry {
  uint32_t rgba = 0;  // 0xRRGGBBAA of the swatch
  std::string text;
};
struct Legend {
  std::string title;  // names the metric, e.g. "Exact fraction (16-bit weight == fp32 master rounded)"
  std::vector<LegendEntry> entries;
};
// The layout map's legend under `shade`; `health` gives the moment magnitudes of the colour bar's ends (null:
// before an analysis, said so in the title).
Legend shade_legend(Shade shade, const HealthMap* health);
// One lane of the overview strip (whole params, so moment ends differ from the map's fragments).
Legend strip_lane_legend(StripLane lane, const HealthMap* health);

}  // namespace ckptdoc::session
