// Legends of the shaded pictures (core's session::Legend): a title naming the metric, a swatch per colour.
#include "view.h"

namespace ckptdoc::imgui_view {

void draw_legend(const session::Legend& legend, bool title) {
  if (title) {
    ImGui::TextUnformatted(legend.title.c_str());
    if (!legend.entries.empty()) ImGui::SameLine();
  }
  const float h = ImGui::GetTextLineHeight();
  for (const auto& e : legend.entries) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(
        p, ImVec2(p.x + h, p.y + h),
        IM_COL32(e.rgba >> 24, (e.rgba >> 16) & 0xFF, (e.rgba >> 8) & 0xFF, e.rgba & 0xFF));
    ImGui::Dummy(ImVec2(h, h));
    ImGui::SameLine();
    ImGui::TextUnformatted(e.text.c_str());
    ImGui::SameLine();
  }
  if (!legend.entries.empty()) ImGui::NewLine();
}

}  // namespace ckptdoc::imgui_view
