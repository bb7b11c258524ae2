#include "imgui_panels.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace ckptdoc::imgui_view {

namespace {

ImU32 param_color(int param, float alpha = 1.0f) {
  const float hue = static_cast<float>(std::fmod(0.13 + param * 0.6180339887, 1.0));
  float r, g, b;
  ImGui::ColorConvertHSVtoRGB(hue, 0.5f, 0.9f, r, g, b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, b, alpha));
}

ImVec4 severity_color(analysis::Severity s) {
  switch (s) {
    case analysis::Severity::Error: return ImVec4(0.85f, 0.25f, 0.25f, 1);
    case analysis::Severity::Warning: return ImVec4(0.95f, 0.62f, 0.1f, 1);
    case analysis::Severity::Info: break;
  }
  return ImVec4(0.35f, 0.6f, 0.95f, 1);
}

// ImGui's built-in font is ASCII only: spell out the few typographic characters core's messages use.
std::string ascii(std::string s) {
  for (auto [from, to] : {std::pair<const char*, const char*>{"\xE2\x80\xA6", "..."}, {"\xE2\x80\x94", "-"},
                          {"\xE2\x80\x93", "-"}, {"\xE2\x89\x88", "~"}, {"\xCE\x94", "d"}}) {
    for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + std::strlen(to)))
      s.replace(pos, std::strlen(from), to);
  }
  return s;
}

void number(double v) {
  if (v < 0)
    ImGui::TextDisabled("-");
  else
    ImGui::Text("%.3g", v);
}

}  // namespace

void draw_header(ViewState& s) {
  if (!s.checkpoint) {
    ImGui::TextColored(ImVec4(0.9f, 0.4f, 0.4f, 1), "Cannot open %s: %s", s.path.c_str(), s.open_error.c_str());
    return;
  }
  const auto& c = s.checkpoint->catalog();
  ImGui::Text("%s", c.tag_dir.c_str());
  ImGui::TextDisabled("tag %s  |  %s, ZeRO stage %d  |  %s weights  |  dp %d, mp %d  |  %lld trainable elements",
                      c.tag.c_str(), std::string(deepspeed::wrapper_name(c.wrapper)).c_str(), c.zero_stage,
                      std::string(dtype_name(c.lp_dtype)).c_str(), c.dp_world_size, c.mp_world_size,
                      static_cast<long long>(c.trainable_numel()));
  if (!s.done.load()) {
    const uint64_t total = s.progress.total();
    const float f = total ? static_cast<float>(static_cast<double>(s.progress.done()) / static_cast<double>(total)) : 0.f;
    ImGui::ProgressBar(f, ImVec2(260, 0), s.progress.stage().c_str());
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) s.progress.cancel();
  } else if (s.report) {
    ImGui::TextDisabled("analysed %.1f MiB in %.2f s on %s", static_cast<double>(s.report->bytes_scanned) / 1048576.0,
                        s.report->seconds, s.report->backend.c_str());
  } else {
    ImGui::TextColored(ImVec4(0.9f, 0.4f, 0.4f, 1), "analysis: %s", s.analysis_error.c_str());
  }
}

void draw_findings(ViewState& s) {
  if (!s.done.load() || !s.report) {  // the worker owns `report` until `done`
    ImGui::TextDisabled(s.done.load() ? "No report." : "Analysing...");
    return;
  }
  // Clean: no error or warning (info findings, e.g. padding not analysed by design, are listed after it).
  if (std::none_of(s.report->findings.begin(), s.report->findings.end(),
                   [](const analysis::Finding& f) { return f.severity != analysis::Severity::Info; }))
    ImGui::TextColored(ImVec4(0.3f, 0.75f, 0.35f, 1), "No problems found.");
  for (const auto& f : s.report->findings) {
    ImGui::PushID(&f);
    ImGui::TextColored(severity_color(f.severity), "%-7s", std::string(analysis::severity_name(f.severity)).c_str());
    ImGui::SameLine();
    ImGui::Text("%s", f.code.c_str());
    if (f.repair != analysis::RepairKind::None) {
      ImGui::SameLine();
      ImGui::TextDisabled("(fix: ckptdoc repair --%s)", std::string(analysis::repair_name(f.repair)).c_str());
    }
    ImGui::Indent();
    ImGui::TextWrapped("%s", ascii(f.message).c_str());
    if (!f.ranks.empty()) {
      std::string r;
      for (int x : f.ranks) r += (r.empty() ? "" : ", ") + std::to_string(x);
      ImGui::TextDisabled("ranks: %s", r.c_str());
    }
    ImGui::Unindent();
    ImGui::PopID();
  }
}

void draw_param_table(ViewState& s) {
  ImGui::SetNextItemWidth(240);
  ImGui::InputTextWithHint("##filter", "filter params", s.filter, sizeof s.filter);
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("params", 7, flags, ImVec2(0, ImGui::GetContentRegionAvail().y))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("param", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("numel");
  ImGui::TableSetupColumn("exact %", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortAscending);
  ImGui::TableSetupColumn("max |d|");
  ImGui::TableSetupColumn("rel L2");
  ImGui::TableSetupColumn("exp_avg_sq mean");
  ImGui::TableSetupColumn("NaN/Inf");
  ImGui::TableHeadersRow();

  struct Row {
    const analysis::ParamReport* p;
    double exact, max_abs, rel, v, bad;
  };
  std::vector<Row> rows;
  if (s.done.load() && s.report)
    for (const auto& p : s.report->params) {
      if (s.filter[0] && p.name.find(s.filter) == std::string::npos) continue;
      double bad = 0;
      for (const auto* v : {&p.lp, &p.fp32, &p.exp_avg, &p.exp_avg_sq})
        if (*v) bad += static_cast<double>((*v)->nan + (*v)->pos_inf + (*v)->neg_inf);
      const auto& d = p.lp_vs_fp32;
      rows.push_back({&p, d ? d->exact_fraction() * 100 : -1, d ? d->max_abs : -1, d ? d->rel_l2() : -1,
                      p.exp_avg_sq ? p.exp_avg_sq->mean() : -1, bad});
    }
  if (const ImGuiTableSortSpecs* spec = ImGui::TableGetSortSpecs(); spec && spec->SpecsCount > 0) {
    const int col = spec->Specs[0].ColumnIndex;
    const bool asc = spec->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
    auto key = [col](const Row& r) -> double {
      switch (col) {
        case 1: return static_cast<double>(r.p->numel);
        case 2: return r.exact;
        case 3: return r.max_abs;
        case 4: return r.rel;
        case 5: return r.v;
        case 6: return r.bad;
        default: return 0;
      }
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      if (col == 0) return asc ? a.p->name < b.p->name : a.p->name > b.p->name;
      return asc ? key(a) < key(b) : key(a) > key(b);
    });
  }
  for (const auto& r : rows) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const bool selected = r.p->name == s.selected_name;
    if (ImGui::Selectable(r.p->name.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns)) {
      s.selected_name = r.p->name;
      if (auto where = s.checkpoint->catalog().find_param(r.p->name)) {
        s.group = where->first;
        s.selected_param = where->second;
      }
    }
    ImGui::TableNextColumn();
    ImGui::Text("%lld", static_cast<long long>(r.p->numel));
    ImGui::TableNextColumn();
    if (r.exact < 0)
      ImGui::TextDisabled("-");
    else if (r.exact < 99)
      ImGui::TextColored(ImVec4(0.9f, 0.35f, 0.35f, 1), "%.2f", r.exact);
    else
      ImGui::Text("%.2f", r.exact);
    ImGui::TableNextColumn();
    number(r.max_abs);
    ImGui::TableNextColumn();
    number(r.rel);
    ImGui::TableNextColumn();
    number(r.v);
    ImGui::TableNextColumn();
    ImGui::Text("%.0f", r.bad);
  }
  ImGui::EndTable();
}

void draw_layout(ViewState& s) {
  if (!s.checkpoint || s.checkpoint->catalog().groups.empty()) {
    ImGui::TextDisabled("No partition layout.");
    return;
  }
  const auto& groups = s.checkpoint->catalog().groups;
  s.group = std::clamp(s.group, 0, static_cast<int>(groups.size()) - 1);
  char label[64];
  std::snprintf(label, sizeof label, "group %d", s.group);
  ImGui::SetNextItemWidth(140);
  if (ImGui::BeginCombo("##group", label)) {
    for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
      std::snprintf(label, sizeof label, "group %d (%zu params)", g, groups[static_cast<size_t>(g)].params.size());
      if (ImGui::Selectable(label, g == s.group)) {
        s.group = g;
        s.selected_param = -1;
      }
    }
    ImGui::EndCombo();
  }
  const auto& g = groups[static_cast<size_t>(s.group)];
  ImGui::SameLine();
  ImGui::TextDisabled("partition %lld elements, %zu ranks  (wheel: zoom, drag: pan)",
                      static_cast<long long>(g.partition_numel), g.partitions.size());

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float label_w = 64, row_h = 18, gap = 3;
  const float width = std::max(50.0f, avail.x - label_w - 4);
  const double P = static_cast<double>(std::max<int64_t>(g.partition_numel, 1));
  const double epp = P / width / s.zoom;  // elements per pixel
  ImGui::InvisibleButton("layout", ImVec2(avail.x, std::max(avail.y, row_h)));
  const bool hovered = ImGui::IsItemHovered();
  const ImGuiIO& io = ImGui::GetIO();
  if (hovered && io.MouseWheel != 0) {
    const double anchor = s.pan + (io.MousePos.x - origin.x - label_w) * epp;
    s.zoom = std::clamp(s.zoom * std::pow(1.25, io.MouseWheel), 1.0, 1e9);
    const double nepp = P / width / s.zoom;
    s.pan = anchor - (io.MousePos.x - origin.x - label_w) * nepp;
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) s.pan -= io.MouseDelta.x * epp;
  const double e_per_px = P / width / s.zoom;
  s.pan = std::clamp(s.pan, 0.0, std::max(0.0, P - width * e_per_px));
  auto x_of = [&](double e) { return origin.x + label_w + static_cast<float>((e - s.pan) / e_per_px); };
  const float x_end = origin.x + label_w + width;

  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  for (size_t r = 0; r < g.partitions.size(); ++r) {
    const float y = origin.y + static_cast<float>(r) * (row_h + gap);
    if (y > origin.y + avail.y) break;
    const auto& part = g.partitions[r];
    char rl[32];
    std::snprintf(rl, sizeof rl, "rank %d", part.rank);
    dl->AddText(ImVec2(origin.x + 4, y + 2), text, rl);
    const float px0 = std::max(x_of(0), origin.x + label_w), px1 = std::min(x_of(P), x_end);
    dl->AddRectFilled(ImVec2(px0, y), ImVec2(px1, y + row_h), IM_COL32(90, 90, 90, 255));
    dl->PushClipRect(ImVec2(px0, y), ImVec2(std::max(px0, px1), y + row_h), true);  // hatch = padding
    for (float hx = px0 - row_h; hx < px1; hx += 6)
      dl->AddLine(ImVec2(hx, y + row_h), ImVec2(hx + row_h, y), IM_COL32(130, 130, 130, 255));
    dl->PopClipRect();
    float last = -1;
    const double first_visible = s.pan;
    auto it = std::partition_point(part.fragments.begin(), part.fragments.end(), [&](const deepspeed::Fragment& f) {
      return static_cast<double>(f.partition_offset + f.numel) <= first_visible;
    });
    for (; it != part.fragments.end(); ++it) {
      float fx0 = std::max(x_of(static_cast<double>(it->partition_offset)), origin.x + label_w);
      float fx1 = std::min(x_of(static_cast<double>(it->partition_offset + it->numel)), x_end);
      if (fx0 >= x_end) break;
      if (std::floor(fx1) <= last) continue;
      fx0 = std::max(fx0, last);
      if (fx1 - fx0 < 1) fx1 = fx0 + 1;
      last = std::floor(fx1);
      const bool sel = it->param == s.selected_param;
      dl->AddRectFilled(ImVec2(fx0, y), ImVec2(fx1, y + row_h),
                        param_color(it->param, s.selected_param < 0 || sel ? 1.0f : 0.35f));
      if (sel) dl->AddRect(ImVec2(fx0, y), ImVec2(fx1, y + row_h), IM_COL32(255, 255, 255, 255), 0, 0, 2);
      const auto& name = g.params[static_cast<size_t>(it->param)].name;
      if (fx1 - fx0 > ImGui::CalcTextSize(name.c_str()).x + 8) {
        dl->PushClipRect(ImVec2(fx0, y), ImVec2(fx1, y + row_h), true);
        dl->AddText(ImVec2(fx0 + 4, y + 2), IM_COL32(20, 20, 20, 255), name.c_str());
        dl->PopClipRect();
      }
      if (hovered && io.MousePos.x >= fx0 && io.MousePos.x < fx1 && io.MousePos.y >= y && io.MousePos.y < y + row_h) {
        ImGui::SetTooltip("%s\nrank %d, partition offset %lld, numel %lld\nparam elements %lld..%lld", name.c_str(),
                          part.rank, static_cast<long long>(it->partition_offset), static_cast<long long>(it->numel),
                          static_cast<long long>(it->param_offset),
                          static_cast<long long>(it->param_offset + it->numel));
        if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 16) {
          s.selected_param = it->param;
          s.selected_name = name;
        }
      }
    }
  }
}

}  // namespace ckptdoc::imgui_view
