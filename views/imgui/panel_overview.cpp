// The overview tab: what the checkpoint is, the strip of every param, and one card per finding coloured by
// severity, each repairable one with a Fix button that opens the repair preview.
#include <algorithm>
#include <string>

#include "ckptdoc/analysis/verdict.h"
#include "ckptdoc/short_list.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

ImVec4 severity_colour(analysis::Severity s) {
  switch (s) {
    case analysis::Severity::Error:
      return ImVec4(0.90f, 0.30f, 0.28f, 1);
    case analysis::Severity::Warning:
      return ImVec4(0.96f, 0.65f, 0.15f, 1);
    case analysis::Severity::Info:
      break;
  }
  return ImVec4(0.40f, 0.65f, 0.98f, 1);
}

const char* repair_label(analysis::RepairKind k) {
  switch (k) {
    case analysis::RepairKind::RefreshFp32:
      return "Fix: refresh fp32 masters";
    case analysis::RepairKind::ResetOptimizer:
      return "Fix: reset optimizer state";
    case analysis::RepairKind::DropOptimizer:
      return "Fix: drop optimizer state";
    case analysis::RepairKind::Repartition:
      return "Fix: re-partition";
    case analysis::RepairKind::RestoreModelFiles:
      return "Fix: restore model files";
    case analysis::RepairKind::None:
      break;
  }
  return "";
}

void summary(View& v, const model::Catalog& c) {
  int params = 0;
  for (const auto& g : c.groups) params += static_cast<int>(g.params.size());
  ImGui::TextUnformatted(c.tag_dir.c_str());
  if (ImGui::BeginTable("summary", 2, ImGuiTableFlags_SizingFixedFit)) {
    v.summary_rows.clear();
    auto row = [&v](const char* k, const std::string& val) {
      v.summary_rows.emplace_back(k, val);
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", k);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(val.c_str());
    };
    row("Tag", c.tag);
    if (!c.optimizer_text.empty()) row("Optimizer", c.optimizer_text);
    row("Weights", std::string(dtype_name(c.lp_dtype)));
    row("World", "data parallel " + std::to_string(c.dp_world_size) + ", model parallel " +
                     std::to_string(c.mp_world_size));
    row("Params", std::to_string(params) + " trainable in " + std::to_string(c.groups.size()) + " groups (" +
                      std::to_string(c.trainable_numel()) + " elements), " +
                      std::to_string(c.frozen_params.size()) + " frozen");
    row("Steps", "global " + std::to_string(c.global_steps) + ", skipped " + std::to_string(c.skipped_steps) +
                     (c.optimizer_step ? ", optimizer step " + std::to_string(*c.optimizer_step) : ""));
    char b[64];
    std::snprintf(b, sizeof b, "%zu files, %.1f MiB", c.file_count,
                  static_cast<double>(c.file_bytes) / 1048576.0);
    row("Files", b);
    for (const auto& f : c.facts) row(f.label.c_str(), f.value);
    ImGui::EndTable();
  }
}

}  // namespace

void draw_overview(View& v) {
  auto& s = v.session;
  const auto* cat = s.catalog();
  ImGui::BeginChild("overview", ImVec2(0, 0), false);
  const auto* storage = s.storage_map();
  if (!cat && !storage) {
    ImGui::Spacing();
    ImGui::TextUnformatted("No checkpoint open.");
    ImGui::TextDisabled(
        "Type a DeepSpeed save folder, tag folder or rank file (or a PyTorch DCP, Accelerate FSDP or "
        "Megatron-core folder) above, use File > Open (Ctrl+O),");
    ImGui::TextDisabled("pick a recent one, or drop it onto this window.");
    ImGui::EndChild();
    return;
  }
  if (cat) {
    summary(v, *cat);
    ImGui::Spacing();
    draw_strip(v, "overview-strip", 14);
  } else {
    draw_storage_summary(*storage);
  }
  ImGui::Spacing();
  if (s.analysing()) ImGui::TextDisabled("Analysing... (the findings below are the catalog's until it ends)");
  const auto& findings = s.findings();
  // The verdict and what it rests on: "No problems found" only after comparing something
  // (analysis/verdict.h).
  // A self-reporting source's verdict is its own diagnosis' sentence (what `ckptdoc diagnose` prints).
  if (const auto* d = s.source_diagnosis()) {
    ImGui::PushStyleColor(ImGuiCol_Text,
                          d->clean ? ImVec4(0.35f, 0.8f, 0.4f, 1) : ImVec4(0.95f, 0.4f, 0.35f, 1));
    ImGui::TextWrapped("%s", d->verdict.c_str());
    for (const auto& n : d->not_checked) ImGui::TextWrapped("Not checked: %s.", n.c_str());
    ImGui::PopStyleColor();
  }
  if (s.report() && cat) {
    const analysis::Verdict verdict = analysis::verdict_of(*s.report(), *cat);
    if (verdict.kind != analysis::VerdictKind::Problems) {
      const ImVec4 colour = verdict.kind == analysis::VerdictKind::Clean ? ImVec4(0.35f, 0.8f, 0.4f, 1)
                                                                         : ImVec4(0.95f, 0.7f, 0.2f, 1);
      ImGui::PushStyleColor(ImGuiCol_Text, colour);
      ImGui::TextWrapped("%s Checked: %s.", verdict.headline.c_str(), verdict.basis.c_str());
      for (const auto& n : verdict.not_checked) ImGui::TextWrapped("Not checked: %s.", n.c_str());
      ImGui::PopStyleColor();
    }
  }
  for (size_t i = 0; i < findings.size(); ++i) {
    const auto& f = findings[i];
    ImGui::PushID(static_cast<int>(i));
    const ImVec4 c = severity_colour(f.severity);
    const ImVec2 top = ImGui::GetCursorScreenPos();
    ImGui::Indent(10);
    ImGui::TextColored(c, "%s", std::string(analysis::severity_name(f.severity)).c_str());
    ImGui::SameLine();
    ImGui::TextUnformatted(f.code.c_str());
    if (f.repair != analysis::RepairKind::None) {
      ImGui::SameLine();
      ImGui::SetCursorPosX(std::max(ImGui::GetCursorPosX() + 12, ImGui::GetWindowContentRegionMax().x - 230));
      if (ImGui::Button(repair_label(f.repair))) open_repair(v, f);
      v.widgets.record("fix:" + f.code);
    }
    ImGui::PushTextWrapPos(ImGui::GetContentRegionAvail().x - 10);
    ImGui::TextWrapped("%s", display(v, f.message).c_str());
    if (!f.params.empty()) {
      ImGui::TextDisabled("params: %s", short_list(f.params, 6).c_str());
      if (ImGui::IsItemClicked()) select_param(v, f.params.front());
    }
    if (!f.ranks.empty()) {
      std::string r;
      for (size_t k = 0; k < f.ranks.size() && k < 32; ++k) r += (k ? ", " : "") + std::to_string(f.ranks[k]);
      if (f.ranks.size() > 32) r += ", ...";
      ImGui::TextDisabled("ranks: %s", r.c_str());
    }
    ImGui::PopTextWrapPos();
    ImGui::Unindent(10);
    const ImVec2 bottom = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(top, ImVec2(top.x + 4, bottom.y - 2), ImGui::GetColorU32(c));
    ImGui::Spacing();
    ImGui::PopID();
  }
  ImGui::EndChild();
}

}  // namespace ckptdoc::imgui_view
