#pragma once
// The pictures that answer "which rank, which param": the partition layout shaded by health (each fragment by
// its exact fraction, NaN count or moment magnitude) and the overview strip of every param in layout order.
// Core computes them as plain RGBA pixels so both views draw the same thing (Qt as a QImage, ImGui as a
// texture) and a test can read a colour back; views only add labels and outlines.
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/session/layout_geometry.h"

namespace ckptdoc::session {

// How the layout map and the strip are shaded.
enum class Shade : uint8_t {
  Param,            // each param its own hue, the same on every rank
  ExactFraction,    // share of elements where the weight equals its master rounded: green exact, red stale
  NonFinite,        // NaN/Inf count over weight, master and moments: green none, orange (one) to red (many)
  MomentMagnitude,  // sqrt(mean exp_avg_sq) on a log scale (dark low, yellow high); exactly zero is red
};
std::string_view shade_name(Shade s);  // "param", "exact", "nonfinite", "moments"
std::optional<Shade> parse_shade(std::string_view name);
std::string_view shade_label(Shade s);  // menu text, e.g. "Exact fraction"

// What one fragment (one param's slice on one rank), or one whole param, measured.
struct Measures {
  float exact = std::numeric_limits<float>::quiet_NaN();  // exact fraction; NaN without a weight/master pair
  float moment =
      std::numeric_limits<float>::quiet_NaN();  // sqrt(mean exp_avg_sq) (else exp_avg rms); NaN: none
  uint32_t nonfinite = 0;                       // NaN/Inf elements over all its tensors (saturating)
  // Each health shade's level quantised when the map is built (0..kLevels-1; kNoData, kZero), so a picture of
  // two million fragments costs a table lookup per fragment.
  uint8_t code[3] = {255, 255, 255};  // ExactFraction, NonFinite, MomentMagnitude
  static constexpr uint8_t kLevels = 251, kZero = 254, kNoData = 255;
};

// Measures of every fragment of every group (aligned with RankPartition::fragments) and of every param, built
// once from a report off the UI thread; O(fragments).
class HealthMap {
 public:
  static std::shared_ptr<const HealthMap> build(const model::Catalog& catalog,
                                                const analysis::Report& report);

  // Fragment `fragment` of partition `rank_index` of group `group`; null when out of range.
  const Measures* fragment(int group, int rank_index, size_t fragment) const;
  const Measures* param(int group, int param) const;  // the whole param (all ranks merged)
  // 0 (healthy, or low magnitude) .. 1 (worst, or high magnitude); NaN when there is nothing to show.
  float level(Shade shade, const Measures& m, bool whole_param = false) const;
  // How strongly a cell should win when several fragments share a pixel: the one a user must see.
  float salience(Shade shade, const Measures& m, bool whole_param = false) const;
  // A shade's colour and salience for each Measures::code (256 entries each); Param has none.
  static const uint32_t* colour_table(Shade shade);
  static const float* salience_table(Shade shade);
  uint32_t max_nonfinite() const { return max_nonfinite_; }
  // The moment magnitudes that MomentMagnitude's darkest and brightest colours stand for (a colour bar's
  // ends).
  std::pair<float, float> moment_range(bool whole_param) const;

 private:
  std::vector<std::vector<std::vector<Measures>>> fragments_;    // [group][rank index][fragment]
  std::vector<std::vector<Measures>> params_;                    // [group][param]
  float log_moment_lo_[2] = {0, 0}, log_moment_hi_[2] = {0, 0};  // fragments, whole params
  uint32_t max_nonfinite_ = 0;
};

// RGBA pixels, row-major, top row first, 4 bytes per pixel (R, G, B, A): QImage::Format_RGBA8888 and
// GL_RGBA/GL_UNSIGNED_BYTE read them as they are.
struct Raster {
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;
  uint32_t pixel(int x, int y) const;  // 0xRRGGBBAA
};

// Colours shared by both views.
uint32_t param_rgba(int param);                                   // 0xRRGGBBAA
uint32_t shade_rgba(Shade shade, float level, bool zero_moment);  // level NaN: "no data" grey
constexpr uint32_t kZeroMomentRgba = 0xE5322BFFu;

struct LayoutRasterRequest {
  int group = 0;
  Shade shade = Shade::Param;
  int selected_param = -1;  // wins shared pixels; under Shade::Param the others are faded (alpha)
  LayoutGeometry geometry;
  int width = 0, height = 0;  // the whole map widget; only x >= label_width, y >= header_height is drawn
  // 0: transparent where nothing is drawn, faded fragments translucent. Else this colour is there and every
  // pixel comes out opaque (a view can then draw the picture without blending).
  uint32_t background = 0;
};
// The map's rows area, each pixel the fragment under it; where several fragments (or ranks) share a pixel the
// most salient one shows, so one stale rank among 1024 or one NaN fragment among thousands stays visible.
// Padding is hatched grey; outside the partition is transparent. `health` may be null (then only Param
// shades).
Raster layout_raster(const model::GroupLayout& group, const HealthMap* health,
                     const LayoutRasterRequest& request);

// The overview strip: every trainable param in layout order (groups in order, params in flat-buffer order),
// equal width each; a column narrower than a param shows its most salient param.
enum class StripLane : uint8_t { Divergence, Moments, NonFinite };
std::string_view strip_lane_label(StripLane lane);  // "divergence", "moments", "NaN/Inf"
struct StripColumn {
  uint32_t rgba = 0;  // 0 when there is no param
  int group = -1, param = -1;
};
std::vector<StripColumn> param_strip(const model::Catalog& catalog, const HealthMap* health, StripLane lane,
                                     int width);
// Layout order of the strip: (group, param) of every trainable param.
std::vector<std::pair<int, int>> strip_order(const model::Catalog& catalog);

// Tooltip text (plain lines) for a fragment under the map, and for a param of the strip.
std::string describe_fragment(const model::GroupLayout& group, const HealthMap* health, const LayoutHit& hit);
std::string describe_param(const model::Catalog& catalog, const HealthMap* health, int group, int param);

}  // namespace ckptdoc::session
