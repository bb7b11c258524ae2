#include "ckptdoc/session/pictures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "ckptdoc/format/shape_text.h"

namespace ckptdoc::session {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t rgba(int r, int g, int b, int a = 255) {
  return (static_cast<uint32_t>(r) << 24) | (static_cast<uint32_t>(g) << 16) |
         (static_cast<uint32_t>(b) << 8) | static_cast<uint32_t>(a);
}

uint32_t lerp_rgba(uint32_t a, uint32_t b, float t) {
  auto ch = [&](int shift) {
    const float x = static_cast<float>((a >> shift) & 0xFF), y = static_cast<float>((b >> shift) & 0xFF);
    return static_cast<uint32_t>(std::lround(x + (y - x) * t)) << shift;
  };
  return ch(24) | ch(16) | ch(8) | 0xFFu;
}

// Piecewise-linear ramp through `stops` (evenly spaced).
uint32_t ramp(const uint32_t* stops, int n, float t) {
  t = std::clamp(t, 0.0f, 1.0f) * static_cast<float>(n - 1);
  const int i = std::min(n - 2, static_cast<int>(t));
  return lerp_rgba(stops[i], stops[i + 1], t - static_cast<float>(i));
}

// Green (healthy) through yellow and orange to red (worst).
const uint32_t kHealth[] = {0x4CAF50FFu, 0xC0CA33FFu, 0xFDD835FFu, 0xFB8C00FFu, 0xD32F2FFFu};
// Magnitudes, low to high (viridis-like; no red in it, so a red zero stands out).
const uint32_t kMagnitude[] = {0x440154FFu, 0x3B528BFFu, 0x21918CFFu, 0x5EC962FFu, 0xFDE725FFu};
constexpr uint32_t kNoData = 0xA0A0AAFFu;
constexpr uint32_t kPaddingLight = 0xC8C8CCFFu, kPaddingDark = 0x9A9AA0FFu;

float exact_level(float exact) {
  if (std::isnan(exact)) return kNaN;
  const double mismatch = 1.0 - static_cast<double>(exact);
  if (mismatch <= 0) return 0.0f;
  // Log scale: one element in a million off is already yellow-green, a stale rank is red.
  return std::clamp(static_cast<float>((std::log10(mismatch) + 6.0) / 6.0), 0.15f, 1.0f);
}

float nonfinite_level(uint32_t n, uint32_t max_n) {
  if (n == 0) return 0.0f;
  const double top = std::log(static_cast<double>(std::max<uint32_t>(max_n, 2)));
  // A single NaN is already orange-red: it poisons the next step as surely as a million do.
  return std::clamp(static_cast<float>(0.75 + 0.25 * std::log(static_cast<double>(n)) / top), 0.75f, 1.0f);
}

void add_saturating(uint32_t& into, uint64_t n) {
  const uint64_t sum = static_cast<uint64_t>(into) + n;
  into = static_cast<uint32_t>(std::min<uint64_t>(sum, 0xFFFFFFFFu));
}

float moment_of(const analysis::RankMoments& m) {
  const double sq = m.exp_avg_sq_mean();
  if (!std::isnan(sq)) return static_cast<float>(std::sqrt(std::max(0.0, sq)));
  return static_cast<float>(m.exp_avg_rms());
}

// At least two decades around the middle: moments of healthy params differ by a few percent, and stretched
// over the whole ramp they looked like a rainbow of problems; a rank 100x lower still reaches the dark end.
void widen(float& lo, float& hi) {
  if (lo > hi) lo = hi = 0;
  if (hi - lo < 2.0f) {
    const float mid = (lo + hi) * 0.5f;
    lo = mid - 1.0f;
    hi = mid + 1.0f;
  }
}

void put(Raster& r, int x, int y, uint32_t c) {
  uint8_t* p = &r.rgba[(static_cast<size_t>(y) * static_cast<size_t>(r.width) + static_cast<size_t>(x)) * 4];
  p[0] = static_cast<uint8_t>(c >> 24);
  p[1] = static_cast<uint8_t>(c >> 16);
  p[2] = static_cast<uint8_t>(c >> 8);
  p[3] = static_cast<uint8_t>(c);
}

}  // namespace

std::string_view shade_name(Shade s) {
  switch (s) {
    case Shade::Param:
      return "param";
    case Shade::ExactFraction:
      return "exact";
    case Shade::NonFinite:
      return "nonfinite";
    case Shade::MomentMagnitude:
      return "moments";
  }
  return "param";
}

std::optional<Shade> parse_shade(std::string_view name) {
  for (Shade s : {Shade::Param, Shade::ExactFraction, Shade::NonFinite, Shade::MomentMagnitude})
    if (shade_name(s) == name) return s;
  return std::nullopt;
}

std::string_view shade_label(Shade s) {
  switch (s) {
    case Shade::Param:
      return "Param";
    case Shade::ExactFraction:
      return "Exact fraction (weight vs master)";
    case Shade::NonFinite:
      return "NaN/Inf count";
    case Shade::MomentMagnitude:
      return "Moment magnitude";
  }
  return "Param";
}

std::string_view strip_lane_label(StripLane lane) {
  switch (lane) {
    case StripLane::Divergence:
      return "divergence";
    case StripLane::Moments:
      return "moments";
    case StripLane::NonFinite:
      return "NaN/Inf";
  }
  return "";
}

std::shared_ptr<const HealthMap> HealthMap::build(const model::Catalog& catalog,
                                                  const analysis::Report& report) {
  auto map = std::make_shared<HealthMap>();
  std::map<std::string, const analysis::ParamReport*> by_name;
  for (const auto& p : report.params) by_name.emplace(p.name, &p);
  float lo[2] = {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()};
  float hi[2] = {-lo[0], -lo[0]};
  auto note_moment = [&](float m, int which) {
    if (m > 0 && std::isfinite(m)) {
      lo[which] = std::min(lo[which], std::log10(m));
      hi[which] = std::max(hi[which], std::log10(m));
    }
  };
  map->fragments_.resize(catalog.groups.size());
  map->params_.resize(catalog.groups.size());
  for (size_t gi = 0; gi < catalog.groups.size(); ++gi) {
    const auto& g = catalog.groups[gi];
    std::vector<const analysis::ParamReport*> reports(g.params.size(), nullptr);
    auto& params = map->params_[gi];
    params.resize(g.params.size());
    for (size_t pi = 0; pi < g.params.size(); ++pi) {
      auto it = by_name.find(g.params[pi].name);
      if (it == by_name.end()) continue;
      const auto* pr = reports[pi] = it->second;
      Measures& m = params[pi];
      if (pr->lp_vs_fp32 && pr->lp_vs_fp32->count)
        m.exact = static_cast<float>(pr->lp_vs_fp32->exact_fraction());
      for (const auto* s : {&pr->lp, &pr->fp32, &pr->exp_avg, &pr->exp_avg_sq})
        if (*s) add_saturating(m.nonfinite, (*s)->count - (*s)->finite_count());
      if (pr->exp_avg_sq && pr->exp_avg_sq->finite_count())
        m.moment = static_cast<float>(std::sqrt(std::max(0.0, pr->exp_avg_sq->mean())));
      else if (pr->exp_avg && pr->exp_avg->finite_count())
        m.moment = static_cast<float>(pr->exp_avg->rms());
      note_moment(m.moment, 1);
    }
    auto& ranks = map->fragments_[gi];
    ranks.resize(g.partitions.size());
    for (size_t ri = 0; ri < g.partitions.size(); ++ri) {
      const auto& part = g.partitions[ri];
      auto& frags = ranks[ri];
      frags.resize(part.fragments.size());
      for (size_t fi = 0; fi < part.fragments.size(); ++fi) {
        const auto& f = part.fragments[fi];
        const auto* pr = f.param >= 0 && static_cast<size_t>(f.param) < reports.size()
                             ? reports[static_cast<size_t>(f.param)]
                             : nullptr;
        if (!pr) continue;
        Measures& m = frags[fi];
        if (auto d = pr->per_rank.find(part.rank); d != pr->per_rank.end() && d->second.count)
          m.exact = static_cast<float>(d->second.exact_fraction());
        for (const auto& [kind, by_rank] : pr->nonfinite_by_rank)
          if (auto n = by_rank.find(part.rank); n != by_rank.end()) add_saturating(m.nonfinite, n->second);
        if (auto mo = pr->moments_by_rank.find(part.rank); mo != pr->moments_by_rank.end())
          m.moment = moment_of(mo->second);
        note_moment(m.moment, 0);
        map->max_nonfinite_ = std::max(map->max_nonfinite_, m.nonfinite);
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    widen(lo[i], hi[i]);
    map->log_moment_lo_[i] = lo[i];
    map->log_moment_hi_[i] = hi[i];
  }
  // The levels once, quantised, now that the ranges are known.
  auto encode = [&](Measures& m, bool whole) {
    const Shade shades[] = {Shade::ExactFraction, Shade::NonFinite, Shade::MomentMagnitude};
    for (int k = 0; k < 3; ++k) {
      const float l = map->level(shades[k], m, whole);
      m.code[k] = std::isnan(l) ? Measures::kNoData
                  : shades[k] == Shade::MomentMagnitude && m.moment <= 0
                      ? Measures::kZero
                      : static_cast<uint8_t>(std::lround(l * (Measures::kLevels - 1)));
    }
  };
  for (auto& ranks : map->fragments_)
    for (auto& frags : ranks)
      for (auto& m : frags) encode(m, false);
  for (auto& params : map->params_)
    for (auto& m : params) encode(m, true);
  return map;
}

namespace {

int shade_slot(Shade s) {
  return s == Shade::ExactFraction ? 0 : s == Shade::NonFinite ? 1 : 2;
}

struct ShadeTables {
  uint32_t colour[3][256];
  float salience[3][256];
  ShadeTables() {
    const Shade shades[] = {Shade::ExactFraction, Shade::NonFinite, Shade::MomentMagnitude};
    for (int k = 0; k < 3; ++k)
      for (int c = 0; c < 256; ++c) {
        const float l = static_cast<float>(c) / (Measures::kLevels - 1);
        const bool nodata = c == Measures::kNoData || (c >= Measures::kLevels && c != Measures::kZero);
        const bool zero = c == Measures::kZero;
        colour[k][c] = shade_rgba(shades[k], nodata ? kNaN : zero ? 0.0f : l, zero);
        salience[k][c] = nodata                                ? 0.0f
                         : shades[k] == Shade::MomentMagnitude ? (zero ? 3.0f : 2.0f - l)
                                                               : 1.0f + l;
      }
  }
};
const ShadeTables& tables() {
  static const ShadeTables t;
  return t;
}

}  // namespace

const uint32_t* HealthMap::colour_table(Shade shade) {
  return shade == Shade::Param ? nullptr : tables().colour[shade_slot(shade)];
}

const float* HealthMap::salience_table(Shade shade) {
  return shade == Shade::Param ? nullptr : tables().salience[shade_slot(shade)];
}

const Measures* HealthMap::fragment(int group, int rank_index, size_t fragment) const {
  if (group < 0 || static_cast<size_t>(group) >= fragments_.size()) return nullptr;
  const auto& ranks = fragments_[static_cast<size_t>(group)];
  if (rank_index < 0 || static_cast<size_t>(rank_index) >= ranks.size()) return nullptr;
  const auto& f = ranks[static_cast<size_t>(rank_index)];
  return fragment < f.size() ? &f[fragment] : nullptr;
}

const Measures* HealthMap::param(int group, int param) const {
  if (group < 0 || static_cast<size_t>(group) >= params_.size()) return nullptr;
  const auto& p = params_[static_cast<size_t>(group)];
  return param >= 0 && static_cast<size_t>(param) < p.size() ? &p[static_cast<size_t>(param)] : nullptr;
}

float HealthMap::level(Shade shade, const Measures& m, bool whole_param) const {
  switch (shade) {
    case Shade::Param:
      return 0;
    case Shade::ExactFraction:
      return exact_level(m.exact);
    case Shade::NonFinite:
      return nonfinite_level(m.nonfinite, max_nonfinite_);
    case Shade::MomentMagnitude: {
      if (std::isnan(m.moment)) return kNaN;
      if (m.moment <= 0) return 0;
      const int w = whole_param ? 1 : 0;
      return std::clamp((std::log10(m.moment) - log_moment_lo_[w]) / (log_moment_hi_[w] - log_moment_lo_[w]),
                        0.0f, 1.0f);
    }
  }
  return kNaN;
}

std::pair<float, float> HealthMap::moment_range(bool whole_param) const {
  const int w = whole_param ? 1 : 0;
  return {std::pow(10.0f, log_moment_lo_[w]), std::pow(10.0f, log_moment_hi_[w])};
}

float HealthMap::salience(Shade shade, const Measures& m, bool whole_param) const {
  const float l = level(shade, m, whole_param);
  if (std::isnan(l)) return 0;
  if (shade == Shade::MomentMagnitude)  // the smallest magnitude is the anomaly to see; exact zeros above all
    return m.moment <= 0 ? 3.0f : 2.0f - l;
  return 1.0f + l;
}

uint32_t Raster::pixel(int x, int y) const {
  const uint8_t* p =
      &rgba[(static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 4];
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

uint32_t param_rgba(int param) {
  // Golden-ratio hues: neighbours differ clearly, and the colour depends only on the param index.
  const double h = std::fmod(0.13 + param * 0.6180339887, 1.0) * 6.0;
  const double s = 0.5, v = 0.9;
  const int i = static_cast<int>(h) % 6;
  const double f = h - std::floor(h);
  const double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
  double r = v, g = t, b = p;
  switch (i) {
    case 1:
      r = q, g = v, b = p;
      break;
    case 2:
      r = p, g = v, b = t;
      break;
    case 3:
      r = p, g = q, b = v;
      break;
    case 4:
      r = t, g = p, b = v;
      break;
    case 5:
      r = v, g = p, b = q;
      break;
    default:
      break;
  }
  return rgba(static_cast<int>(std::lround(r * 255)), static_cast<int>(std::lround(g * 255)),
              static_cast<int>(std::lround(b * 255)));
}

uint32_t shade_rgba(Shade shade, float level, bool zero_moment) {
  if (shade == Shade::MomentMagnitude && zero_moment) return kZeroMomentRgba;
  if (std::isnan(level)) return kNoData;
  if (shade == Shade::MomentMagnitude) return ramp(kMagnitude, 5, level);
  return ramp(kHealth, 5, level);
}

Raster layout_raster(const model::GroupLayout& group, const HealthMap* health,
                     const LayoutRasterRequest& rq) {
  Raster r;
  r.width = std::max(0, rq.width);
  r.height = std::max(0, rq.height);
  r.rgba.assign(static_cast<size_t>(r.width) * static_cast<size_t>(r.height) * 4, 0);
  const LayoutGeometry& g = rq.geometry;
  const int x_begin = std::clamp(static_cast<int>(std::ceil(g.label_width)), 0, r.width);
  const int y_begin = std::clamp(static_cast<int>(std::ceil(g.header_height)), 0, r.height);
  auto fill_background = [&](int y0, int y1, int x0) {
    if (!rq.background) return;
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < r.width; ++x) put(r, x, y, rq.background);
  };
  fill_background(0, r.height, 0);
  if (x_begin >= r.width || y_begin >= r.height || group.partitions.empty() || g.pitch() <= 0) return r;
  const Shade shade = health ? rq.shade : Shade::Param;
  const int gi = group.index;
  const int w = r.width - x_begin;
  const double px_part_begin = g.x_of(0), px_part_end = g.x_of(static_cast<double>(group.partition_numel));
  const double e_first = std::max(0.0, g.element_at(x_begin));
  const double e_last = g.element_at(r.width);
  // Fading the other params helps find one param's fragments among many hues; a health shade keeps its
  // colours (they are the point) and the view outlines the selected param instead.
  const bool fading = rq.selected_param >= 0 && shade == Shade::Param;
  std::vector<uint32_t> param_colours;  // once per param, not per fragment
  if (shade == Shade::Param) {
    param_colours.resize(group.params.size());
    for (size_t p = 0; p < param_colours.size(); ++p) param_colours[p] = param_rgba(static_cast<int>(p));
  }
  const uint32_t* colour_lut = HealthMap::colour_table(shade);
  const float* salience_lut = HealthMap::salience_table(shade);
  const int slot = shade == Shade::Param ? 0 : shade_slot(shade);
  // Colours travel as 0xRRGGBBAA; 0 is "nothing here", 1 "padding" (hatched when written out).
  constexpr uint32_t kNothing = 0, kPadding = 1;
  auto finish = [&](uint32_t c, int x, int y) -> uint32_t {
    if (c == kPadding) c = ((x + y) % 6) < 2 ? kPaddingDark : kPaddingLight;
    if (!rq.background || (c & 0xFF) == 0xFF) return c;
    return lerp_rgba(rq.background, c | 0xFF,
                     static_cast<float>(c & 0xFF) / 255.0f);  // opaque over the background
  };

  // Paints rank ri's fragments into a row of pixel columns (colour and salience): a fragment's colour is
  // computed once, not per pixel, and where several fragments (of one or more ranks) share a pixel the most
  // salient, or the selected one, wins.
  auto paint_rank = [&](int ri, uint32_t* colours, float* salience) {
    const auto& part = group.partitions[static_cast<size_t>(ri)];
    for (size_t i = first_fragment_ending_after(part, static_cast<int64_t>(std::floor(e_first)));
         i < part.fragments.size(); ++i) {
      const auto& f = part.fragments[i];
      if (static_cast<double>(f.partition_offset) > e_last) break;
      int a = static_cast<int>(std::floor(g.x_of(static_cast<double>(f.partition_offset))));
      int b = static_cast<int>(std::ceil(g.x_of(static_cast<double>(f.partition_offset + f.numel))));
      if (b <= a) b = a + 1;  // a sub-pixel fragment still owns (part of) a pixel
      a = std::max(a, x_begin) - x_begin;
      b = std::min(b, r.width) - x_begin;
      if (a >= b) continue;
      const bool selected = f.param == rq.selected_param;
      uint32_t colour;
      float sal = 1.0f;
      if (shade == Shade::Param) {
        colour = static_cast<size_t>(f.param) < param_colours.size()
                     ? param_colours[static_cast<size_t>(f.param)]
                     : kNoData;
      } else if (const Measures* m = health->fragment(gi, ri, i)) {
        colour = colour_lut[m->code[slot]];
        sal = salience_lut[m->code[slot]];
      } else {
        colour = kNoData;
        sal = 0;
      }
      if (selected) sal += 10.0f;
      if (fading && !selected) colour = (colour & 0xFFFFFF00u) | 0x50u;  // faded, drawn over the background
      for (int c = a; c < b; ++c)
        if (colours[c] <= kPadding || sal > salience[c]) {
          colours[c] = colour;
          salience[c] = sal;
        }
      // A darker first pixel separates fragments four pixels wide and more.
      if (b - a >= 4 && colours[a] == colour)
        colours[a] = (lerp_rgba(colour, 0x202020FFu, 0.3f) & 0xFFFFFF00u) | (colour & 0xFFu);
    }
  };
  const int pad0 = std::clamp(static_cast<int>(std::floor(px_part_begin)), x_begin, r.width) - x_begin;
  const int pad1 = std::clamp(static_cast<int>(std::ceil(px_part_end)), x_begin, r.width) - x_begin;
  std::vector<uint32_t> row(static_cast<size_t>(w));
  std::vector<float> row_salience(static_cast<size_t>(w));
  auto start_row = [&] {
    std::fill(row.begin(), row.end(), kNothing);
    std::fill(row.begin() + pad0, row.begin() + std::max(pad0, pad1), kPadding);
    std::fill(row_salience.begin(), row_salience.end(), -1.0f);
  };

  const auto [first, last] = g.visible_ranks(r.height);
  const bool thin = g.pitch() < 1.0;
  int painted = -1;  // roomy rows: the rank `row` holds, reused for each of its pixel rows
  for (int y = y_begin; y < r.height; ++y) {
    // The ranks drawn in this pixel row: one (or none, in a gap) for roomy rows, several for thin ones.
    const double top = y - g.header_height + g.scroll_y;
    int r0 = static_cast<int>(std::floor(top / g.pitch()));
    int r1 = thin ? static_cast<int>(std::ceil((top + 1) / g.pitch())) : r0 + 1;
    r0 = std::max(r0, first);
    r1 = std::min(r1, last);
    if (r0 >= r1) continue;
    if (!thin && top + 0.5 - r0 * g.pitch() >= g.row_height) continue;  // the gap below a row
    if (thin || painted != r0) {
      start_row();
      for (int ri = r0; ri < r1; ++ri) paint_rank(ri, row.data(), row_salience.data());
      painted = thin ? -1 : r0;
    }
    uint8_t* out =
        &r.rgba[(static_cast<size_t>(y) * static_cast<size_t>(r.width) + static_cast<size_t>(x_begin)) * 4];
    for (int c = 0; c < w; ++c, out += 4) {
      const uint32_t col = row[static_cast<size_t>(c)];
      if (col == kNothing) continue;
      const uint32_t v = finish(col, c + x_begin, y);
      out[0] = static_cast<uint8_t>(v >> 24), out[1] = static_cast<uint8_t>(v >> 16),
      out[2] = static_cast<uint8_t>(v >> 8), out[3] = static_cast<uint8_t>(v);
    }
  }
  return r;
}

std::vector<std::pair<int, int>> strip_order(const model::Catalog& catalog) {
  std::vector<std::pair<int, int>> order;
  for (size_t gi = 0; gi < catalog.groups.size(); ++gi)
    for (size_t pi = 0; pi < catalog.groups[gi].params.size(); ++pi)
      order.emplace_back(static_cast<int>(gi), static_cast<int>(pi));
  return order;
}

std::vector<StripColumn> param_strip(const model::Catalog& catalog, const HealthMap* health, StripLane lane,
                                     int width) {
  std::vector<StripColumn> cols(static_cast<size_t>(std::max(0, width)));
  const auto order = strip_order(catalog);
  if (order.empty() || width <= 0) return cols;
  const Shade shade = lane == StripLane::Divergence ? Shade::ExactFraction
                      : lane == StripLane::Moments  ? Shade::MomentMagnitude
                                                    : Shade::NonFinite;
  std::vector<float> best(cols.size(), -1.0f);
  const double per_param = static_cast<double>(width) / static_cast<double>(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const auto [g, p] = order[k];
    const Measures* m = health ? health->param(g, p) : nullptr;
    const float level = m ? health->level(shade, *m, true) : std::numeric_limits<float>::quiet_NaN();
    const float sal = m ? health->salience(shade, *m, true) : 0.0f;
    const uint32_t c = shade_rgba(shade, level, m && !std::isnan(m->moment) && m->moment <= 0);
    int a = static_cast<int>(std::floor(static_cast<double>(k) * per_param));
    int b = static_cast<int>(std::floor(static_cast<double>(k + 1) * per_param));
    if (b <= a) b = a + 1;
    a = std::clamp(a, 0, width - 1);
    b = std::clamp(b, a + 1, width);
    for (int x = a; x < b; ++x) {
      auto& col = cols[static_cast<size_t>(x)];
      if (col.param < 0 || sal > best[static_cast<size_t>(x)]) {
        col = {c, g, p};
        best[static_cast<size_t>(x)] = sal;
      }
    }
  }
  return cols;
}

namespace {

void measures_text(std::ostringstream& o, const Measures& m) {
  char buf[96];
  if (!std::isnan(m.exact)) {
    std::snprintf(buf, sizeof buf, "exact %.4f %%", 100.0 * static_cast<double>(m.exact));
    o << "\n" << buf;
  } else {
    o << "\nexact: no weight/master pair";
  }
  o << "\nNaN/Inf: " << m.nonfinite;
  if (!std::isnan(m.moment)) {
    std::snprintf(buf, sizeof buf, "sqrt(mean exp_avg_sq) %.3g", static_cast<double>(m.moment));
    o << "\n" << buf;
  }
}

}  // namespace

std::string describe_fragment(const model::GroupLayout& group, const HealthMap* health,
                              const LayoutHit& hit) {
  std::ostringstream o;
  if (hit.rank < 0 || static_cast<size_t>(hit.rank) >= group.partitions.size()) return {};
  const auto& part = group.partitions[static_cast<size_t>(hit.rank)];
  if (hit.fragment < 0 || static_cast<size_t>(hit.fragment) >= part.fragments.size()) {
    o << "padding\nrank " << part.rank << ", element " << hit.element << " of " << group.partition_numel
      << "\n"
      << part.padding << " padding elements on this rank";
    return o.str();
  }
  const auto& f = part.fragments[static_cast<size_t>(hit.fragment)];
  const auto& pe = group.params[static_cast<size_t>(f.param)];
  o << pe.name << " " << shape_text(pe.shape) << "\nrank " << part.rank << ", group " << group.index
    << "\npartition offset " << f.partition_offset << ", numel " << f.numel << "\nparam elements "
    << f.param_offset << " - " << f.param_offset + f.numel << " of " << pe.numel;
  if (health)
    if (const Measures* m = health->fragment(group.index, hit.rank, static_cast<size_t>(hit.fragment)))
      measures_text(o, *m);
  return o.str();
}

std::string describe_param(const model::Catalog& catalog, const HealthMap* health, int group, int param) {
  if (group < 0 || static_cast<size_t>(group) >= catalog.groups.size()) return {};
  const auto& g = catalog.groups[static_cast<size_t>(group)];
  if (param < 0 || static_cast<size_t>(param) >= g.params.size()) return {};
  const auto& pe = g.params[static_cast<size_t>(param)];
  std::ostringstream o;
  o << pe.name << " " << shape_text(pe.shape) << "\ngroup " << group << ", " << pe.numel << " elements";
  if (health)
    if (const Measures* m = health->param(group, param)) measures_text(o, *m);
  return o.str();
}

}  // namespace ckptdoc::session
