// The partition layout tab: the strip, then the group and shading menus over the map. The map is core's
// session::layout_raster in a texture (re-made only when the view changes), with rank labels, the selected
// param's outline and param names drawn on top. Wheel zooms, drag pans, Shift+wheel scrolls ranks, Ctrl+wheel
// zooms rows, double-click fits, a click selects.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "no_blend.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

uint64_t raster_key(const View& v, const session::LayoutGeometry& g, int w, int h) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%llu|%d|%d|%s|%.9g|%.9g|%.9g|%.9g|%.9g|%d|%d",
                static_cast<unsigned long long>(v.session.generation()), v.layout.group,
                static_cast<int>(v.layout.shade), v.selected.c_str(), g.first_element, g.elements_per_pixel,
                g.scroll_y, g.row_height, g.row_gap, w, h);
  return std::hash<std::string>{}(buf);
}

}  // namespace

void draw_layout(View& v) {
  auto& s = v.session;
  const model::Catalog* cat = s.catalog();
  if (!cat || cat->groups.empty()) {
    ImGui::TextDisabled("No partition layout (open a ZeRO checkpoint).");
    return;
  }
  draw_strip(v, "layout-strip", 12);
  LayoutState& L = v.layout;
  L.group = std::clamp(L.group, 0, static_cast<int>(cat->groups.size()) - 1);
  const auto& g = cat->groups[static_cast<size_t>(L.group)];
  char label[96];
  std::snprintf(label, sizeof label, "group %d (%zu params)", L.group, g.params.size());
  ImGui::SetNextItemWidth(170);
  if (ImGui::BeginCombo("##group", label)) {
    for (int i = 0; i < static_cast<int>(cat->groups.size()); ++i) {
      std::snprintf(label, sizeof label, "group %d (%zu params, %lld elements)", i,
                    cat->groups[static_cast<size_t>(i)].params.size(),
                    static_cast<long long>(cat->groups[static_cast<size_t>(i)].numel));
      if (ImGui::Selectable(label, i == L.group)) {
        L.group = i;
        L.auto_fit = true;
      }
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(250);
  if (ImGui::BeginCombo("shade by", session::shade_label(L.shade).data())) {
    for (auto sh : {session::Shade::Param, session::Shade::ExactFraction, session::Shade::NonFinite,
                    session::Shade::MomentMagnitude})
      if (ImGui::Selectable(session::shade_label(sh).data(), sh == L.shade)) {
        L.shade = sh;
        L.shade_chosen = true;
      }
    ImGui::EndCombo();
  }
  v.widgets.record("layout.shade");
  ImGui::SameLine();
  if (ImGui::Button("Fit")) L.auto_fit = true;
  const auto legend = session::shade_legend(L.shade, s.health());
  draw_legend(legend);
  L.legend_drawn = legend.title;
  ImGui::TextDisabled(
      "%s, %zu ranks, partition %lld elements, %lld padding  (wheel: zoom, drag: pan, "
      "shift+wheel: ranks, ctrl+wheel: rows, double-click: fit)",
      cat->partitioning_text.c_str(), g.partitions.size(), static_cast<long long>(g.partition_numel),
      static_cast<long long>(g.padded_numel - g.numel));

  // The map fills what is left; geometry in pixels relative to its top-left corner.
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const int w = std::max(64, static_cast<int>(avail.x)), h = std::max(64, static_cast<int>(avail.y));
  auto& geo = L.geometry;
  geo.label_width = 64;
  geo.header_height = 4;
  geo.rank_count = static_cast<int>(g.partitions.size());
  geo.partition_numel = g.partition_numel;
  if (L.auto_fit) {
    geo.fit(w);
    geo.fit_rows(h, 24);
  }
  ImGui::InvisibleButton("layout-map", ImVec2(static_cast<float>(w), static_cast<float>(h)));
  const bool hovered = ImGui::IsItemHovered();
  const ImGuiIO& io = ImGui::GetIO();
  const ImVec2 m(io.MousePos.x - origin.x, io.MousePos.y - origin.y);
  if (hovered && io.MouseWheel != 0) {
    const double f = std::pow(1.25, io.MouseWheel);
    if (io.KeyShift)
      geo.scroll_y -= io.MouseWheel * std::max(1.0, geo.pitch()) * 3;
    else if (io.KeyCtrl)
      geo.zoom_rows_at(m.y, f);
    else
      geo.zoom_at(m.x, f);
    L.auto_fit = false;
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
    geo.first_element -= io.MouseDelta.x * geo.elements_per_pixel;
    geo.scroll_y -= io.MouseDelta.y;
    L.auto_fit = false;
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) L.auto_fit = true;
  geo.clamp(w, h);

  // The picture is computed by a session job (the newest request supersedes one in flight); until it lands
  // the previous one is drawn where its pixels now belong, so panning never waits for it.
  const uint64_t key = raster_key(v, geo, w, h);
  if (key != L.raster_key && key != L.pending_key) {
    session::LayoutRasterRequest rq;
    rq.group = L.group;
    rq.shade = L.shade;
    rq.selected_param = -1;
    if (const auto ref = s.find_param(v.selected); ref && ref->group == L.group)
      rq.selected_param = ref->param;
    rq.geometry = geo;
    rq.width = w;
    rq.height = h;
    const ImVec4 bg = ImGui::GetStyleColorVec4(ImGuiCol_WindowBg);
    rq.background = (static_cast<uint32_t>(bg.x * 255) << 24) | (static_cast<uint32_t>(bg.y * 255) << 16) |
                    (static_cast<uint32_t>(bg.z * 255) << 8) | 0xFFu;
    L.pending_key = key;
    auto catalog = s.shared_catalog();  // keeps the group alive for the worker
    auto health = s.health_ptr();
    const auto* group = &g;
    s.queue().submit<session::Raster>(
        session::JobKind::Other, "layout-raster", "Drawing the layout",
        [catalog, health, group, rq](session::JobQueue::Context&) {
          return session::layout_raster(*group, health.get(), rq);
        },
        [&v, key, rq](session::Outcome<session::Raster>& o) {
          LayoutState& st = v.layout;
          if (!o.ok() || st.pending_key != key) return;
          st.map.upload(o.value->width, o.value->height, o.value->rgba.data());
          st.raster_key = key;
          st.pending_key = 0;
          st.drawn = rq.geometry;
        });
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (!L.map.empty()) {  // opaque (composed over the window colour in core), so drawn without blending
    // Where the drawn picture's corners are now: element and rank positions map linearly between geometries.
    const auto& d = L.drawn;
    auto to_x = [&](double x) { return geo.x_of(d.element_at(x)); };
    auto to_y = [&](double y) {
      return geo.header_height + (y - d.header_height + d.scroll_y) / d.pitch() * geo.pitch() - geo.scroll_y;
    };
    const double lw = geo.label_width, hh = geo.header_height;
    const ImVec2 p0(origin.x + static_cast<float>(to_x(lw)), origin.y + static_cast<float>(to_y(hh)));
    const ImVec2 p1(origin.x + static_cast<float>(to_x(L.map.width())),
                    origin.y + static_cast<float>(to_y(L.map.height())));
    const ImVec2 uv0(static_cast<float>(lw / L.map.width()), static_cast<float>(hh / L.map.height()));
    dl->PushClipRect(ImVec2(origin.x + static_cast<float>(lw), origin.y + static_cast<float>(hh)),
                     ImVec2(origin.x + w, origin.y + h), true);
    NoBlend opaque(dl);
    dl->AddImage(L.map.id(), p0, p1, uv0, ImVec2(1, 1));
    dl->PopClipRect();
  }
  dl->PushClipRect(origin, ImVec2(origin.x + w, origin.y + h), true);

  // Rank labels: all of them when rows are tall enough, else every k-th.
  const auto [first, last] = geo.visible_ranks(h);
  const float text_h = ImGui::GetTextLineHeight();
  const int every = geo.pitch() >= text_h ? 1 : static_cast<int>(std::ceil((text_h + 2) / geo.pitch()));
  for (int r = first; r < last; ++r) {
    if (r % every) continue;
    char rl[32];
    std::snprintf(rl, sizeof rl, every == 1 ? "rank %d" : "%d", g.partitions[static_cast<size_t>(r)].rank);
    const float y = origin.y + static_cast<float>(geo.row_top(r)) +
                    (every == 1 ? static_cast<float>(geo.row_height) * 0.5f - text_h * 0.5f : -text_h * 0.5f);
    dl->AddText(ImVec2(origin.x + 4, y), ImGui::GetColorU32(ImGuiCol_Text), rl);
  }
  // The selected param's outline and, in tall rows, param names.
  const auto sel = s.find_param(v.selected);
  const int sel_param = sel && sel->group == L.group ? sel->param : -1;
  const double e_first = std::max(0.0, geo.element_at(geo.label_width)), e_last = geo.element_at(w);
  if (geo.row_height >= 4 && (sel_param >= 0 || geo.row_height >= text_h))
    for (int r = first; r < last; ++r) {
      const auto& part = g.partitions[static_cast<size_t>(r)];
      const float top = origin.y + static_cast<float>(geo.row_top(r));
      for (size_t i = session::first_fragment_ending_after(part, static_cast<int64_t>(e_first));
           i < part.fragments.size(); ++i) {
        const auto& f = part.fragments[i];
        if (static_cast<double>(f.partition_offset) > e_last) break;
        const float x0 = origin.x + static_cast<float>(std::max(
                                        geo.label_width, geo.x_of(static_cast<double>(f.partition_offset))));
        const float x1 = origin.x + static_cast<float>(std::min<double>(
                                        w, geo.x_of(static_cast<double>(f.partition_offset + f.numel))));
        if (f.param == sel_param && geo.row_height >= 4)
          dl->AddRect(ImVec2(x0, top), ImVec2(std::max(x1, x0 + 1), top + static_cast<float>(geo.row_height)),
                      IM_COL32(255, 255, 255, 255), 0, 0, geo.row_height >= 10 ? 2.0f : 1.0f);
        if (geo.row_height >= text_h && x1 - x0 > 48) {
          const auto& name = g.params[static_cast<size_t>(f.param)].name;
          dl->PushClipRect(ImVec2(x0, top), ImVec2(x1, top + static_cast<float>(geo.row_height)), true);
          dl->AddText(ImVec2(x0 + 4, top + static_cast<float>(geo.row_height) * 0.5f - text_h * 0.5f),
                      IM_COL32(20, 20, 20, 255), name.c_str());
          dl->PopClipRect();
        }
      }
    }
  dl->PopClipRect();

  if (hovered) {
    if (const auto hit = session::hit_test(g, geo, m.x, m.y)) {
      ImGui::SetTooltip("%s", display(v, s.describe_fragment(L.group, *hit)).c_str());
      if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 16 &&
          hit->param >= 0)
        select_param(v, g.params[static_cast<size_t>(hit->param)].name);
    }
  }
}

}  // namespace ckptdoc::imgui_view
