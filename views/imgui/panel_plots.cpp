// The plots of the selected param drawn with ImDrawList (Debian ships no ImPlot): |fp32 - weight| and the
// moments as log-magnitude step histograms, ULP-distance bars, the weight-vs-master density (streamed from
// the memory map by a session job, drawn as a texture with the y = x diagonal) and the exact fraction per
// rank.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "ckptdoc/session/off_scale.h"
#include "ckptdoc/session/ulp_label.h"
#include "no_blend.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

constexpr int kDensityBins = 80;
const ImU32 kAxis = IM_COL32(150, 150, 160, 255);

// A plot box: title on top, an inner area mapping data ranges to pixels.
struct Box {
  ImVec2 p0, p1;  // inner area
  double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  bool hovered = false;
  float x(double vx) const { return p0.x + static_cast<float>((vx - xlo) / (xhi - xlo)) * (p1.x - p0.x); }
  float y(double vy) const { return p1.y - static_cast<float>((vy - ylo) / (yhi - ylo)) * (p1.y - p0.y); }
  double data_x(float px) const { return xlo + (px - p0.x) / (p1.x - p0.x) * (xhi - xlo); }
};

Box begin_box(const char* id, const char* title, const char* xlabel, ImVec2 size, bool frame = true) {
  ImGui::BeginGroup();
  ImGui::TextUnformatted(title);
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, ImVec2(size.x, size.y - ImGui::GetTextLineHeightWithSpacing() * 2));
  Box b;
  b.hovered = ImGui::IsItemHovered();
  b.p0 = ImVec2(o.x + 44, o.y + 4);
  // Below the inner area a row of tick labels, then the axis title (it was drawn over the ticks).
  b.p1 = ImVec2(o.x + size.x - 8, o.y + size.y - ImGui::GetTextLineHeightWithSpacing() * 3 - 2);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (frame) dl->AddRect(b.p0, b.p1, kAxis);
  ImGui::TextDisabled("%s", xlabel);
  ImGui::EndGroup();
  return b;
}

void empty_box(const char* id, const char* title, const std::string& why, ImVec2 size) {
  Box b = begin_box(id, title, "", size);
  const ImVec2 t = ImGui::CalcTextSize(why.c_str());
  ImGui::GetWindowDrawList()->AddText(ImVec2((b.p0.x + b.p1.x - t.x) * 0.5f, (b.p0.y + b.p1.y - t.y) * 0.5f),
                                      ImGui::GetColorU32(ImGuiCol_TextDisabled), why.c_str());
}

void y_labels(const Box& b, double ymax) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ymax >= 1e5 ? "%.2g" : "%.0f", ymax);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddText(ImVec2(b.p0.x - 42, b.p0.y - 2), kAxis, buf);
  dl->AddText(ImVec2(b.p0.x - 12, b.p1.y - 14), kAxis, "0");
}

void x_ticks(const Box& b, double lo, double hi, double step, const char* fmt) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9; t += step) {
    const float x = b.x(t);
    dl->AddLine(ImVec2(x, b.p1.y), ImVec2(x, b.p1.y + 3), kAxis);
    char buf[32];
    std::snprintf(buf, sizeof buf, fmt, t);
    dl->AddText(ImVec2(x - 8, b.p1.y + 2), kAxis, buf);
  }
}

}  // namespace

// A log-magnitude histogram as filled bars over log10 of the bin edges; in each bin the lower of the two
// layers is drawn over the higher (`negative` is a subset of `h` for moments, disjoint from it for a diff).
void log_histogram(const char* id, const char* title, const char* xlabel, const LogHistogram& h,
                   const LogHistogram* negative, ImVec2 size, const char* second_name) {
  int first = -1, last = -1;
  for (const LogHistogram* x : {&h, negative})
    if (x)
      for (int i = 0; i < LogHistogram::kBins; ++i)
        if (x->counts[static_cast<size_t>(i)]) {
          first = first < 0 ? i : std::min(first, i);
          last = std::max(last, i);
        }
  if (first < 0) {
    empty_box(id, title, h.zeros ? "all values are exactly zero" : "no non-zero values", size);
    return;
  }
  first = std::max(0, first - 2);
  last = std::min(LogHistogram::kBins - 1, last + 2);
  double ymax = 1;
  for (const LogHistogram* x : {&h, negative})
    if (x)
      for (int i = first; i <= last; ++i)
        ymax = std::max(ymax, static_cast<double>(x->counts[static_cast<size_t>(i)]));
  std::string label = xlabel;
  if (h.zeros) label += "   (" + std::to_string(h.zeros) + " zeros)";
  if (h.nonfinite) label += "   (" + std::to_string(h.nonfinite) + " NaN/Inf)";
  Box b = begin_box(id, title, label.c_str(), size);
  b.xlo = std::floor(LogHistogram::log10_lower_edge(first));
  b.xhi = std::ceil(last + 1 < LogHistogram::kBins ? LogHistogram::log10_lower_edge(last + 1) : b.xlo + 1);
  b.yhi = ymax * 1.05;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  {
    NoBlend opaque(dl);
    const ImU32 first_fill = IM_COL32(78, 155, 216, 255), second_fill = IM_COL32(224, 138, 0, 255);
    for (int i = first; i <= last; ++i) {
      const double e0 = LogHistogram::log10_lower_edge(i);
      const double e1 = i + 1 < LogHistogram::kBins ? LogHistogram::log10_lower_edge(i + 1) : e0 + 0.075;
      const double c1 = static_cast<double>(h.counts[static_cast<size_t>(i)]);
      const double c2 = negative ? static_cast<double>(negative->counts[static_cast<size_t>(i)]) : 0;
      auto bar = [&](double c, ImU32 fill) {
        if (c > 0)
          dl->AddRectFilled(ImVec2(b.x(e0), b.y(c)), ImVec2(std::max(b.x(e1), b.x(e0) + 1), b.p1.y), fill);
      };
      if (c1 >= c2) {
        bar(c1, first_fill);
        bar(c2, second_fill);
      } else {
        bar(c2, second_fill);
        bar(c1, first_fill);
      }
    }
  }
  y_labels(b, ymax);
  x_ticks(b, b.xlo, b.xhi, std::max(1.0, std::ceil((b.xhi - b.xlo) / 8)), "%.0f");
  if (b.hovered) {
    const double lx = b.data_x(ImGui::GetIO().MousePos.x);
    for (int i = first; i <= last; ++i) {
      const double e0 = LogHistogram::log10_lower_edge(i);
      const double e1 = i + 1 < LogHistogram::kBins ? LogHistogram::log10_lower_edge(i + 1) : e0 + 0.075;
      if (lx >= e0 && lx < e1) {
        ImGui::SetTooltip("10^%.2f .. 10^%.2f\n%llu elements%s", e0, e1,
                          static_cast<unsigned long long>(h.counts[static_cast<size_t>(i)]),
                          negative ? (" (" + std::to_string(negative->counts[static_cast<size_t>(i)]) + " " +
                                      second_name + ")")
                                         .c_str()
                                   : "");
        break;
      }
    }
  }
}

namespace {

void ulp_bars(const View& v, const char* id, const UlpHistogram& h, ImVec2 size) {
  Box b = begin_box(id, "ULP distance", "ULPs between weight and rounded master", size);
  double ymax = 1;
  for (auto c : h.counts) ymax = std::max(ymax, static_cast<double>(c));
  b.xlo = -0.5;
  b.xhi = UlpHistogram::kBuckets - 0.5;
  b.yhi = ymax * 1.05;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  {
    NoBlend opaque(dl);
    for (int k = 0; k < UlpHistogram::kBuckets; ++k) {
      const double c = static_cast<double>(h.counts[static_cast<size_t>(k)]);
      if (c > 0)
        dl->AddRectFilled(ImVec2(b.x(k - 0.45), b.y(c)), ImVec2(b.x(k + 0.45), b.p1.y),
                          k == 0 ? IM_COL32(108, 160, 108, 255) : IM_COL32(214, 96, 77, 255));
    }
  }
  y_labels(b, ymax);
  // Labelled by ULPs, as the Qt chart is (0, 1, 4, … 16k), at the same buckets: never by bucket index.
  ImDrawList* tl = ImGui::GetWindowDrawList();
  for (int k = 0; k < UlpHistogram::kBuckets; k += (k == 0 ? 1 : 2)) {
    const std::string text = display(v, session::ulp_axis_label(k));
    const float x = b.x(k), w = ImGui::CalcTextSize(text.c_str()).x;
    tl->AddLine(ImVec2(x, b.p1.y), ImVec2(x, b.p1.y + 3), kAxis);
    tl->AddText(ImVec2(x - w * 0.5f, b.p1.y + 2), kAxis, text.c_str());
  }
  if (b.hovered) {
    const int k = static_cast<int>(std::lround(b.data_x(ImGui::GetIO().MousePos.x)));
    if (k >= 0 && k < UlpHistogram::kBuckets)
      ImGui::SetTooltip("%s ulp: %llu elements", UlpHistogram::bucket_label(k).c_str(),
                        static_cast<unsigned long long>(h.counts[static_cast<size_t>(k)]));
  }
}

// The density as a texture: light to dark by log(count), the diagonal on top.
void density_plot(View& v, ImVec2 size) {
  auto& d = v.density;
  const char* title = "weight vs fp32 master";
  if (!d.error.empty()) return empty_box("density", title, display(v, d.error), size);
  if (!d.density) return empty_box("density", title, d.job ? "loading..." : "select a param", size);
  const auto& den = *d.density;
  if (den.pairs == 0) return empty_box("density", title, "weights or fp32 master not available", size);
  Box b = begin_box("density", title, "x: weight (upcast), y: fp32 master; dashed: y = x", size, false);
  // Square (both axes share one range, so the diagonal stays the diagonal), centred in the box.
  const float side = std::min(b.p1.x - b.p0.x, b.p1.y - b.p0.y);
  b.p0.x = (b.p0.x + b.p1.x - side) * 0.5f;
  b.p1 = ImVec2(b.p0.x + side, b.p0.y + side);
  if (d.image.empty()) {  // opaque: empty bins take the window's colour, so it is drawn without blending
    const ImVec4 bg = ImGui::GetStyleColorVec4(ImGuiCol_WindowBg);
    std::vector<uint8_t> rgba(static_cast<size_t>(den.bins) * static_cast<size_t>(den.bins) * 4, 255);
    for (size_t i = 0; i < rgba.size(); i += 4) {
      rgba[i] = static_cast<uint8_t>(bg.x * 255), rgba[i + 1] = static_cast<uint8_t>(bg.y * 255);
      rgba[i + 2] = static_cast<uint8_t>(bg.z * 255);
    }
    const double top = std::log1p(static_cast<double>(den.max_count));
    for (int iy = 0; iy < den.bins; ++iy)
      for (int ix = 0; ix < den.bins; ++ix)
        if (const uint64_t n = den.at(ix, iy)) {
          const double t = std::log1p(static_cast<double>(n)) / top;  // 0..1
          uint8_t* p = &rgba[(static_cast<size_t>(den.bins - 1 - iy) * static_cast<size_t>(den.bins) +
                              static_cast<size_t>(ix)) *
                             4];
          p[0] = static_cast<uint8_t>(198 - 190 * t), p[1] = static_cast<uint8_t>(219 - 150 * t),
          p[2] = static_cast<uint8_t>(239 - 91 * t), p[3] = 255;
        }
    d.image.upload(den.bins, den.bins, rgba.data());
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  {
    NoBlend opaque(dl);
    dl->AddImage(d.image.id(), b.p0, b.p1);
  }
  dl->AddRect(b.p0, b.p1, kAxis);
  for (int k = 0; k < 40; k += 2) {  // dashed diagonal
    const float t0 = k / 40.0f, t1 = (k + 1) / 40.0f;
    dl->AddLine(ImVec2(b.p0.x + t0 * side, b.p1.y - t0 * side),
                ImVec2(b.p0.x + t1 * side, b.p1.y - t1 * side), IM_COL32(220, 60, 60, 255), 1.5f);
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g", den.lo);
  dl->AddText(ImVec2(b.p0.x - 40, b.p1.y - 14), kAxis, buf);
  std::snprintf(buf, sizeof buf, "%.3g", den.hi);
  dl->AddText(ImVec2(b.p0.x - 40, b.p0.y), kAxis, buf);
  const ImVec2 m = ImGui::GetIO().MousePos;
  if (b.hovered && m.x >= b.p0.x && m.x < b.p1.x && m.y >= b.p0.y && m.y < b.p1.y) {
    const int ix = std::clamp(static_cast<int>((m.x - b.p0.x) / side * den.bins), 0, den.bins - 1);
    const int iy = std::clamp(static_cast<int>((b.p1.y - m.y) / side * den.bins), 0, den.bins - 1);
    const double w = (den.hi - den.lo) / den.bins;
    ImGui::SetTooltip("weight %.4g .. %.4g\nmaster %.4g .. %.4g\n%llu elements", den.lo + ix * w,
                      den.lo + (ix + 1) * w, den.lo + iy * w, den.lo + (iy + 1) * w,
                      static_cast<unsigned long long>(den.at(ix, iy)));
  }
}

// Per rank, the share of elements whose weight is not its master rounded, as bars on core's log scale
// (session::OffScale, as the Qt view draws it): a healthy checkpoint draws no bar, 0.013 % off a visible one.
void rank_bars(View& v, ImVec2 size) {
  const char* title = "Elements off per rank (all params)";
  const auto& per = v.session.per_rank_divergence();
  if (per.empty()) return empty_box("ranks", title, "no weight/master pairs", size);
  Box b = begin_box("ranks", title, "dp rank; bar: elements off (log)", size);
  const auto scale = session::OffScale::fit(per);
  b.xlo = -0.5;
  b.xhi = static_cast<double>(per.rbegin()->first) + 0.5;
  b.yhi = scale.top();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  {
    NoBlend opaque(dl);
    for (const auto& [rank, d] : per) {
      const double h = scale.height(session::off_fraction(d));
      if (h <= 0) continue;
      const float x0 = b.x(rank - 0.45), x1 = std::max(b.x(rank + 0.45), x0 + 1);
      dl->AddRectFilled(ImVec2(x0, b.y(h)), ImVec2(x1, b.p1.y), IM_COL32(211, 47, 47, 255));
    }
  }
  for (const auto& [at, text] : scale.ticks()) {  // labels right-aligned left of the axis
    const float y = b.y(at);
    dl->AddLine(ImVec2(b.p0.x - 3, y), ImVec2(b.p0.x, y), kAxis);
    const ImVec2 t = ImGui::CalcTextSize(text.c_str());
    dl->AddText(ImVec2(b.p0.x - 4 - t.x, y - t.y * 0.5f), kAxis, text.c_str());
  }
  x_ticks(b, 0, b.xhi, std::max(1.0, std::pow(10.0, std::floor(std::log10(std::max(1.0, b.xhi / 2))))),
          "%.0f");
  if (b.hovered) {
    const int rank = static_cast<int>(std::lround(b.data_x(ImGui::GetIO().MousePos.x)));
    if (auto it = per.find(rank); it != per.end())
      ImGui::SetTooltip("rank %d: %llu of %llu elements off (%.4g %%)", rank,
                        static_cast<unsigned long long>(it->second.count - it->second.exact),
                        static_cast<unsigned long long>(it->second.count),
                        100.0 * session::off_fraction(it->second));
  }
}

}  // namespace

void draw_plots(View& v) {
  auto& s = v.session;
  // The density follows the selection (a session job; a newer selection supersedes it).
  auto& d = v.density;
  if (!v.selected.empty() && s.is_open() && (d.param != v.selected || d.generation != s.generation())) {
    d.param = v.selected;
    d.generation = s.generation();
    d.density.reset();
    d.error.clear();
    d.image.clear();
    d.job = s.density(v.selected, kDensityBins,
                      [&v, param = v.selected](session::Outcome<analysis::Density2D>& o) {
                        if (o.superseded() || v.density.param != param) return;
                        if (o.ok())
                          v.density.density = std::move(*o.value);
                        else
                          v.density.error = o.error->message;
                      });
  }
  const analysis::ParamReport* p = s.param_report(v.selected);
  ImGui::Separator();
  if (v.selected.empty())
    ImGui::TextDisabled("No param selected: click one in the table, the strip or the layout map.");
  else
    ImGui::Text("Param %s", v.selected.c_str());
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImVec2 size(std::max(160.0f, avail.x / 3 - 6), std::max(120.0f, avail.y / 2 - 6));
  const std::string why = s.report() ? "select a param" : "analyse first";
  if (p && p->lp_vs_fp32) {
    log_histogram("div", "|fp32 - weight|", "log10 |d|", p->lp_vs_fp32->log_abs_diff, nullptr, size);
    ImGui::SameLine();
    ulp_bars(v, "ulp", p->lp_vs_fp32->ulp, size);
  } else if (p && p->lp) {  // weights with nothing to compare them with: their own values
    log_histogram("div", "weight values", "log10 |weight|  (orange: negative)", p->lp->log_abs,
                  &p->lp->log_abs_negative, size);
    ImGui::SameLine();
    empty_box("ulp", "ULP distance", "no fp32 master to compare the weight with", size);
  } else {
    empty_box("div", "|fp32 - weight|", p ? "no weight/master pair" : why, size);
    ImGui::SameLine();
    empty_box("ulp", "ULP distance", p ? "no weight/master pair" : why, size);
  }
  ImGui::SameLine();
  density_plot(v, size);
  if (p && p->exp_avg)
    log_histogram("m1", "exp_avg", "log10 |exp_avg|  (orange: negative)", p->exp_avg->log_abs,
                  &p->exp_avg->log_abs_negative, size);
  else
    empty_box("m1", "exp_avg", p ? "no exp_avg in the optimizer state" : why, size);
  ImGui::SameLine();
  if (p && p->exp_avg_sq)
    log_histogram("m2", "exp_avg_sq", "log10 exp_avg_sq", p->exp_avg_sq->log_abs,
                  p->exp_avg_sq->negatives ? &p->exp_avg_sq->log_abs_negative : nullptr, size);
  else
    empty_box("m2", "exp_avg_sq", p ? "no exp_avg_sq in the optimizer state" : why, size);
  ImGui::SameLine();
  rank_bars(v, size);
}

}  // namespace ckptdoc::imgui_view
