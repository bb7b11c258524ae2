// The overview strip: every param in layout order in three lanes (divergence, moment magnitude, NaN/Inf),
// core's session::param_strip pixels in a texture with a legend line per lane; hover names a param, a click
// selects it.
#include <algorithm>
#include <functional>

#include "view.h"

namespace ckptdoc::imgui_view {

namespace {
constexpr session::StripLane kLanes[] = {session::StripLane::Divergence, session::StripLane::Moments,
                                         session::StripLane::NonFinite};
constexpr float kLabel = 82, kGap = 3;
}  // namespace

void draw_strip(View& v, const char* id, float lane_h) {
  auto& s = v.session;
  const auto* cat = s.catalog();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float width = std::max(50.0f, ImGui::GetContentRegionAvail().x - kLabel - 4);
  const int w = static_cast<int>(width);
  const float height = 3 * (lane_h + kGap);
  ImGui::InvisibleButton(id, ImVec2(kLabel + width, height));
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  if (cat)  // what each lane's colours mean: the metric's name, then its swatches
    for (auto lane : kLanes) {
      const auto legend = session::strip_lane_legend(lane, s.health());
      const std::string label(session::strip_lane_label(lane)),
          metric = legend.title.substr(0, legend.title.find(':'));
      if (metric == label)
        ImGui::TextDisabled("%s:", label.c_str());
      else
        ImGui::TextDisabled("%s (%s):", label.c_str(), metric.c_str());
      ImGui::SameLine();
      draw_legend(legend, false);
    }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (int i = 0; i < 3; ++i)
    dl->AddText(ImVec2(origin.x, origin.y + i * (lane_h + kGap) + (lane_h - ImGui::GetFontSize()) * 0.5f),
                ImGui::GetColorU32(ImGuiCol_TextDisabled), session::strip_lane_label(kLanes[i]).data());
  if (!cat) return;

  // One texture row per lane, refreshed when the analysis, the width or the selection changes.
  const uint64_t key = std::hash<std::string>{}(std::to_string(s.generation()) + ":" + std::to_string(w));
  if (v.layout.strip_key != key || v.layout.strip.width() != w) {
    std::vector<uint8_t> rgba(static_cast<size_t>(w) * 3 * 4, 0);
    for (int i = 0; i < 3; ++i) {
      const auto cols = s.param_strip(kLanes[i], w);
      for (int x = 0; x < w; ++x) {
        const uint32_t c = cols[static_cast<size_t>(x)].rgba;
        uint8_t* p = &rgba[(static_cast<size_t>(i) * static_cast<size_t>(w) + static_cast<size_t>(x)) * 4];
        p[0] = static_cast<uint8_t>(c >> 24), p[1] = static_cast<uint8_t>(c >> 16),
        p[2] = static_cast<uint8_t>(c >> 8), p[3] = static_cast<uint8_t>(c);
      }
    }
    v.layout.strip.upload(w, 3, rgba.data());
    v.layout.strip_key = key;
  }
  for (int i = 0; i < 3; ++i) {
    const float y = origin.y + i * (lane_h + kGap);
    dl->AddImage(v.layout.strip.id(), ImVec2(origin.x + kLabel, y), ImVec2(origin.x + kLabel + w, y + lane_h),
                 ImVec2(0, (i + 0.0f) / 3), ImVec2(1, (i + 1.0f) / 3));
  }
  // The selected param's columns.
  const auto order = session::strip_order(*cat);
  if (const auto ref = s.find_param(v.selected); ref && !order.empty()) {
    const auto it = std::find(order.begin(), order.end(), std::pair{ref->group, ref->param});
    const double per = static_cast<double>(w) / static_cast<double>(order.size());
    const float x0 = origin.x + kLabel + static_cast<float>((it - order.begin()) * per);
    const float x1 = std::max(x0 + 2, origin.x + kLabel + static_cast<float>((it - order.begin() + 1) * per));
    dl->AddRect(ImVec2(x0 - 1, origin.y - 1), ImVec2(x1 + 1, origin.y + height - kGap + 1),
                IM_COL32(255, 255, 255, 230), 0, 0, 1.5f);
  }
  if (!hovered) return;
  const float mx = ImGui::GetIO().MousePos.x - origin.x - kLabel;
  if (mx < 0 || mx >= w) return;
  const auto cols = s.param_strip(session::StripLane::Divergence, w);
  const auto& col = cols[static_cast<size_t>(mx)];
  if (col.param < 0) return;
  ImGui::SetTooltip("%s", display(v, s.describe_param(col.group, col.param)).c_str());
  if (clicked)
    select_param(v, cat->groups[static_cast<size_t>(col.group)].params[static_cast<size_t>(col.param)].name);
}

}  // namespace ckptdoc::imgui_view
