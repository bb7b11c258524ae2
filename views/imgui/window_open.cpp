// The file dialog (ImGui has none): a folder's entries, listed by a session job so a slow file system never
// stalls a frame; double-click a folder to enter it, pick a save folder, tag folder or rank file and Open.
// The same dialog picks B for the diff (File > Compare with...): then its choice is compared, not opened; and
// the 16-bit weights a ZeRO-3 analysis compares with (Analysis > Compare with 16-bit weights...).
#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "view.h"

namespace fs = std::filesystem;

namespace ckptdoc::imgui_view {

namespace {

using Entries = std::vector<OpenWindow::Entry>;

void list(View& v, const std::string& dir) {
  OpenWindow& w = v.open_window;
  w.dir = dir;
  w.selected.clear();
  w.error.clear();
  w.entries.clear();
  w.listing = v.session.queue().submit<Entries>(
      session::JobKind::Other, "browse", "Listing " + dir,
      [dir](session::JobQueue::Context& c) {
        Entries out;
        for (const auto& e : fs::directory_iterator(dir)) {
          c.check();
          std::error_code ec;
          out.push_back({e.path().filename().string(), e.is_directory(ec)});
        }
        std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
          return a.is_dir != b.is_dir ? a.is_dir : a.name < b.name;
        });
        return out;
      },
      [&v, dir](session::Outcome<Entries>& o) {
        if (o.superseded() || v.open_window.dir != dir) return;
        if (o.ok())
          v.open_window.entries = std::move(*o.value);
        else
          v.open_window.error = o.error->message;
      });
}

const char* kPickTitles[] = {"Open checkpoint###pick", "Compare with###pick",
                             "16-bit weights to compare with###pick"};

// Opens the pick, compares the open source with it, or compares ZeRO-3's fp32 partitions with it.
void choose(View& v, const std::string& path) {
  if (v.open_window.pick == PickFor::Diff)
    compare_with(v, path);
  else if (v.open_window.pick == PickFor::LpWeights)
    compare_with_lp_weights(v, path);
  else
    open_path(v, path);
}

}  // namespace

void draw_open_window(View& v) {
  OpenWindow& w = v.open_window;
  if (!w.visible) return;
  if (w.dir.empty()) {
    std::error_code ec;
    const fs::path start = v.path[0] ? fs::path(v.path) : fs::current_path(ec);
    list(v, (fs::is_directory(start, ec) ? start : start.parent_path()).string());
  }
  ImGui::SetNextWindowSize(ImVec2(620, 460), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin(kPickTitles[static_cast<int>(w.pick)], &w.visible)) {
    ImGui::End();
    return;
  }
  if (ImGui::Button("Up")) list(v, fs::path(w.dir).parent_path().string());
  ImGui::SameLine();
  ImGui::TextUnformatted(w.dir.c_str());
  ImGui::BeginChild("entries", ImVec2(0, -ImGui::GetFrameHeightWithSpacing() * 1.5f), true);
  if (!w.error.empty()) ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "%s", w.error.c_str());
  if (w.listing && !w.listing->finished()) ImGui::TextDisabled("listing...");
  std::string enter;
  for (const auto& e : w.entries) {
    const std::string label = (e.is_dir ? "[dir]  " : "       ") + e.name;
    if (ImGui::Selectable(label.c_str(), w.selected == e.name, ImGuiSelectableFlags_AllowDoubleClick)) {
      w.selected = e.name;
      if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
        if (e.is_dir)
          enter = e.name;
        else {
          choose(v, (fs::path(w.dir) / e.name).string());
          w.visible = false;
        }
      }
    }
  }
  ImGui::EndChild();
  if (!enter.empty()) list(v, (fs::path(w.dir) / enter).string());
  ImGui::TextDisabled("a save folder (holding `latest`), a tag folder or a rank file");
  ImGui::SameLine();
  if (ImGui::Button(w.pick == PickFor::Open ? "Open" : "Compare")) {
    choose(v, w.selected.empty() ? w.dir : (fs::path(w.dir) / w.selected).string());
    w.visible = false;
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) w.visible = false;
  if (!w.visible) w.dir.clear();
  ImGui::End();
}

void draw_jobs(View& v) {
  if (!v.show_jobs) return;
  ImGui::SetNextWindowSize(ImVec2(560, 220), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin("Jobs", &v.show_jobs)) {
    ImGui::End();
    return;
  }
  const auto jobs = v.session.jobs();
  if (jobs.empty()) ImGui::TextDisabled("No job is running.");
  for (const auto& j : jobs) {
    ImGui::PushID(static_cast<int>(j->id()));
    ImGui::ProgressBar(static_cast<float>(j->fraction()), ImVec2(160, 0));
    ImGui::SameLine();
    ImGui::Text("%s [%s] %s  %.1f s", display(v, j->title()).c_str(),
                std::string(session::job_state_name(j->state())).c_str(), display(v, j->stage()).c_str(),
                j->seconds());
    ImGui::SameLine();
    if (ImGui::SmallButton("Cancel")) j->cancel();
    ImGui::PopID();
  }
  ImGui::End();
}

}  // namespace ckptdoc::imgui_view
