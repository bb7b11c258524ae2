// The menu bar and the tool row: open (path field, file dialog, recent), compare with, export, re-analyse,
// device, the running jobs' progress with cancel, and the last notice.
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

void progress_row(View& v) {
  const auto jobs = v.session.jobs();
  if (jobs.empty()) {
    if (const auto* r = v.session.report()) {
      // The row ends at the window's edge: what does not fit moves to the tooltip rather than being cut off.
      char full[256], brief[96];
      std::snprintf(full, sizeof full, "analysed %.1f MiB in %.2f s on %s",
                    static_cast<double>(r->bytes_scanned) / 1048576.0, r->seconds, r->backend.c_str());
      std::snprintf(brief, sizeof brief, "analysed %.1f MiB in %.2f s",
                    static_cast<double>(r->bytes_scanned) / 1048576.0, r->seconds);
      const bool fits = ImGui::CalcTextSize(full).x <= ImGui::GetContentRegionAvail().x;
      ImGui::TextDisabled("%s", fits ? full : brief);
      if (!fits && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", full);
    } else if (const auto& e = v.session.analysis_error())
      ImGui::TextColored(ImVec4(0.95f, 0.45f, 0.4f, 1), "analysis: %s", display(v, e->message).c_str());
    return;
  }
  // The oldest job leads (open, then analysis); the rest are counted.
  const auto& j = jobs.front();
  const std::string label = j->stage().empty() ? j->title() : j->title() + ": " + j->stage();
  ImGui::ProgressBar(
      j->total() ? static_cast<float>(j->fraction()) : -1.0f * static_cast<float>(ImGui::GetTime()),
      ImVec2(320, 0), display(v, label).c_str());
  ImGui::SameLine();
  if (ImGui::SmallButton("Cancel")) j->cancel();
  v.widgets.record("job.cancel");
  if (jobs.size() > 1) {
    ImGui::SameLine();
    ImGui::TextDisabled("+%zu more jobs", jobs.size() - 1);
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      for (size_t i = 1; i < jobs.size(); ++i)
        ImGui::Text("%s  %.0f %%", display(v, jobs[i]->title()).c_str(), 100.0 * jobs[i]->fraction());
      ImGui::EndTooltip();
    }
  }
}

}  // namespace

void draw_header(View& v) {
  auto& s = v.session;
  // A self-reporting source (DCP, Accelerate, Megatron-core) is exported and compared by its own weights.
  const sources::Source* source = s.storage_source();
  const bool exportable = s.shared_catalog() || (source && source->can(sources::Command::Export));
  const bool comparable = s.shared_catalog() || (source && source->can(sources::Command::Diff));
  if (ImGui::BeginMenuBar()) {
    if (ImGui::BeginMenu("File")) {
      if (ImGui::MenuItem("Open...", "Ctrl+O")) {
        v.open_window.visible = true;
        v.open_window.pick = PickFor::Open;
      }
      if (ImGui::BeginMenu("Open recent", !v.recent.paths().empty())) {
        for (const auto& p : v.recent.paths())
          if (ImGui::MenuItem(p.c_str())) open_path(v, p);
        ImGui::Separator();
        if (ImGui::MenuItem("Clear list")) v.recent.clear();
        ImGui::EndMenu();
      }
      if (ImGui::MenuItem("Compare with...", "Ctrl+D", false, comparable)) {
        v.open_window.visible = true;
        v.open_window.pick = PickFor::Diff;
      }
      if (ImGui::MenuItem("Export weights...", "Ctrl+E", false, exportable)) v.exporting.visible = true;
      ImGui::Separator();
      if (ImGui::MenuItem("Quit", "Ctrl+Q")) v.quit = true;
      ImGui::EndMenu();
    }
    const bool deepspeed_open = s.is_open() && s.catalog() && !s.catalog()->weights_only;
    const model::Catalog* cat = s.is_open() ? s.catalog() : nullptr;  // what the open source can do
    if (ImGui::BeginMenu("Checkpoint")) {
      const sources::Source* repairer = s.repairing_source();
      const bool repairs = repairer ? repairer->can(sources::Command::Repair) : deepspeed_open;
      if (ImGui::MenuItem("Repair...", nullptr, false, repairs)) open_repair(v, analysis::RepairKind::None);
      v.widgets.record("menu.repair");
      if (ImGui::MenuItem("Convert to universal...", nullptr, false, cat && cat->convertible))
        open_convert(v);
      v.widgets.record("menu.convert");
      ImGui::EndMenu();
    } else {
      v.widgets.record("menu.checkpoint");  // the label, while it is the last item (closed)
    }
    if (ImGui::BeginMenu("Analysis")) {
      if (ImGui::MenuItem("Re-analyse", "F5", false, s.is_open())) s.analyse();
      if (ImGui::MenuItem("Compare with 16-bit weights...", nullptr, false,
                          cat && cat->lp_weights_elsewhere)) {
        v.open_window.visible = true;
        v.open_window.pick = PickFor::LpWeights;
      }
      if (ImGui::MenuItem("Cancel analysis", "Esc", false, s.analysing())) s.cancel_analysis();
      if (ImGui::BeginMenu("Compute device")) {
        const char* names[] = {"Auto (CUDA when available)", "CPU", "CUDA"};
        for (int i = 0; i < 3; ++i)
          if (ImGui::MenuItem(names[i], nullptr, static_cast<int>(s.settings().device) == i))
            s.settings().device = static_cast<DeviceKind>(i);
        ImGui::EndMenu();
      }
      ImGui::MenuItem("Verify checksums", nullptr, &s.settings().verify_checksums);
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("View")) {
      const char* names[] = {"Overview", "Partition layout", "Params", "Diff"};
      for (int i = 0; i < 4; ++i)
        if (ImGui::MenuItem(names[i], nullptr, static_cast<int>(v.tab) == i)) {
          v.tab = static_cast<Tab>(i);
          v.tab_requested = true;
        }
      ImGui::Separator();
      ImGui::MenuItem("Jobs", nullptr, &v.show_jobs);
      ImGui::EndMenu();
    }
    ImGui::EndMenuBar();
  }
  // Shortcuts.
  const ImGuiIO& io = ImGui::GetIO();
  if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O, false)) {
    v.open_window.visible = true;
    v.open_window.pick = PickFor::Open;
  }
  if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_D, false) && comparable) {
    v.open_window.visible = true;
    v.open_window.pick = PickFor::Diff;
  }
  if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_E, false) && exportable) v.exporting.visible = true;
  if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_Q, false)) v.quit = true;
  if (ImGui::IsKeyPressed(GLFW_KEY_F5, false) && s.is_open()) s.analyse();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false) && s.analysing()) s.cancel_analysis();

  // The path field: type or paste a save folder, tag folder or rank file; Enter opens it.
  ImGui::SetNextItemWidth(std::max(200.0f, ImGui::GetContentRegionAvail().x - 520));
  const bool enter = ImGui::InputTextWithHint(
      "##path", "checkpoint: save folder, tag folder or rank file (or drop one here)", v.path, sizeof v.path,
      ImGuiInputTextFlags_EnterReturnsTrue);
  v.widgets.record("path");
  ImGui::SameLine();
  if (ImGui::Button("Open") || enter) open_path(v, v.path);
  v.widgets.record("open");
  ImGui::SameLine();
  if (ImGui::Button("Browse...")) {
    v.open_window.visible = true;
    v.open_window.pick = PickFor::Open;
  }
  ImGui::SameLine();
  if (ImGui::Button("Export...") && exportable) v.exporting.visible = true;
  v.widgets.record("export");
  ImGui::SameLine();
  progress_row(v);
  if (!v.status.empty()) {
    if (v.status_error)
      ImGui::TextColored(ImVec4(0.95f, 0.45f, 0.4f, 1), "%s", display(v, v.status).c_str());
    else
      ImGui::TextDisabled("%s", display(v, v.status).c_str());
  }
}

}  // namespace ckptdoc::imgui_view
