// The params tab: a sortable, filterable table of every trainable param (only visible rows are drawn, and the
// order is computed once per analysis, sort or filter change), above the plots of the selected param.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

enum Col {
  Name,
  Group,
  Numel,
  MaxAbs,
  RelL2,
  Exact,
  Fp32Rms,
  ExpAvgRms,
  ExpAvgSqMean,
  NonFinite,
  Score,
  Count
};

double key_of(const analysis::ParamReport& p, int col) {
  const auto& d = p.lp_vs_fp32;
  constexpr double none = -1;
  switch (col) {
    case Group:
      return p.group;
    case Numel:
      return static_cast<double>(p.numel);
    case MaxAbs:
      return d ? d->max_abs : none;
    case RelL2:
      return d ? d->rel_l2() : none;
    case Exact:
      return d ? d->exact_fraction() : none;
    case Fp32Rms:
      return p.fp32 ? p.fp32->rms() : none;
    case ExpAvgRms:
      return p.exp_avg ? p.exp_avg->rms() : none;
    case ExpAvgSqMean:
      return p.exp_avg_sq ? p.exp_avg_sq->mean() : none;
    case NonFinite: {
      double n = 0;
      for (const auto* s : {&p.lp, &p.fp32, &p.exp_avg, &p.exp_avg_sq})
        if (*s) n += static_cast<double>((*s)->count - (*s)->finite_count());
      return n;
    }
    case Score:
      return p.severity_score();
    default:
      return 0;
  }
}

void number(double v) {
  if (v < 0 || !std::isfinite(v))
    ImGui::TextDisabled("-");
  else
    ImGui::Text("%.3g", v);
}

// Sorts and filters the report's params when the analysis, the sort or the filter changed.
void refresh_rows(View& v, const analysis::Report& r, const ImGuiTableSortSpecs* spec) {
  const int col = spec && spec->SpecsCount ? spec->Specs[0].ColumnIndex : static_cast<int>(Score);
  const bool asc =
      spec && spec->SpecsCount ? spec->Specs[0].SortDirection == ImGuiSortDirection_Ascending : false;
  const uint64_t key = std::hash<std::string>{}(std::to_string(v.session.generation()) + "|" +
                                                std::to_string(col) + (asc ? "a" : "d") + "|" + v.filter);
  if (key == v.table_key) return;
  v.table_key = key;
  v.table_rows.clear();
  for (size_t i = 0; i < r.params.size(); ++i)
    if (!v.filter[0] || r.params[i].name.find(v.filter) != std::string::npos)
      v.table_rows.push_back(static_cast<int>(i));
  std::vector<double> keys(r.params.size());
  if (col != Name)
    for (int i : v.table_rows) keys[static_cast<size_t>(i)] = key_of(r.params[static_cast<size_t>(i)], col);
  std::stable_sort(v.table_rows.begin(), v.table_rows.end(), [&](int a, int b) {
    if (col == Name)
      return asc ? r.params[static_cast<size_t>(a)].name < r.params[static_cast<size_t>(b)].name
                 : r.params[static_cast<size_t>(a)].name > r.params[static_cast<size_t>(b)].name;
    return asc ? keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)]
               : keys[static_cast<size_t>(a)] > keys[static_cast<size_t>(b)];
  });
}

}  // namespace

void draw_params(View& v) {
  auto& s = v.session;
  const auto* r = s.report();
  ImGui::SetNextItemWidth(280);
  ImGui::InputTextWithHint("##filter", "filter params (substring)", v.filter, sizeof v.filter);
  v.widgets.record("filter");
  ImGui::SameLine();
  if (!r) {
    ImGui::TextDisabled(s.analysing() ? "analysing..." : "analyse first (F5)");
  } else {
    ImGui::TextDisabled("%zu params, worst first by default", r->params.size());
  }
  const float table_h = ImGui::GetContentRegionAvail().y * 0.42f;
  // No RowBg: every filled pixel costs on a software renderer; inner borders separate the columns.
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_BordersOuterH | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_Hideable;
  if (ImGui::BeginTable("params", Count, flags, ImVec2(0, table_h))) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("param", ImGuiTableColumnFlags_WidthStretch | ImGuiTableColumnFlags_NoHide);
    ImGui::TableSetupColumn("group", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("numel", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("max |d|", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("rel L2", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("exact %", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("fp32 rms", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("exp_avg rms", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("exp_avg_sq mean", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("NaN/Inf", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("score", ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_DefaultSort |
                                         ImGuiTableColumnFlags_PreferSortDescending);
    ImGui::TableHeadersRow();
    if (ImGui::TableGetColumnFlags(static_cast<int>(Score)) & ImGuiTableColumnFlags_IsHovered)
      ImGui::SetTooltip(
          "Worst-first sorting key: 10 x the share of elements whose weight is not the master's rounding,\n"
          "+ the relative L2 distance (at most 100), + 1000 when the weight, master or moments hold "
          "NaN/Inf.\n"
          "0: the master rounds to the weight everywhere.");
    if (r) {
      refresh_rows(v, *r, ImGui::TableGetSortSpecs());
      if (v.scroll_table)
        ImGui::SetScrollY(std::fmod(ImGui::GetScrollY() + 3 * ImGui::GetTextLineHeightWithSpacing(),
                                    std::max(1.0f, ImGui::GetScrollMaxY())));
      ImGuiListClipper clipper;
      clipper.Begin(static_cast<int>(v.table_rows.size()));
      while (clipper.Step())
        for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
          const auto& p = r->params[static_cast<size_t>(v.table_rows[static_cast<size_t>(row)])];
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          if (ImGui::Selectable(p.name.c_str(), p.name == v.selected, ImGuiSelectableFlags_SpanAllColumns))
            select_param(v, p.name);
          for (int c = Group; c < Count; ++c) {
            ImGui::TableNextColumn();
            const double k = key_of(p, c);
            if (c == Group || c == Numel || c == NonFinite) {
              if (c == NonFinite && k > 0)
                ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "%.0f", k);
              else
                ImGui::Text("%.0f", k);
            } else if (c == Exact) {
              if (k < 0)
                ImGui::TextDisabled("-");
              else if (k < 0.99)
                ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "%.2f", 100 * k);
              else
                ImGui::Text("%.2f", 100 * k);
            } else {
              number(k);
            }
          }
        }
    } else if (const auto* cat = s.catalog()) {  // before the analysis: the catalog's params
      const auto order = session::strip_order(*cat);
      ImGuiListClipper clipper;
      clipper.Begin(static_cast<int>(order.size()));
      while (clipper.Step())
        for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
          const auto [gi, pi] = order[static_cast<size_t>(row)];
          const auto& p = cat->groups[static_cast<size_t>(gi)].params[static_cast<size_t>(pi)];
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          if (ImGui::Selectable(p.name.c_str(), p.name == v.selected, ImGuiSelectableFlags_SpanAllColumns))
            select_param(v, p.name);
          ImGui::TableNextColumn();
          ImGui::Text("%d", gi);
          ImGui::TableNextColumn();
          ImGui::Text("%lld", static_cast<long long>(p.numel));
        }
    }
    ImGui::EndTable();
  }
  draw_plots(v);
}

}  // namespace ckptdoc::imgui_view
