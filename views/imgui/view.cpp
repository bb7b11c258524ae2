// What several panels share: opening a path, selecting a param, starting a repair, text for the font.
#include "view.h"

#include <cstring>
#include <filesystem>
#include <utility>

#include "ckptdoc/repair/fix_offer.h"
#include "ckptdoc/request_field.h"

namespace ckptdoc::imgui_view {

void WidgetRects::record(const std::string& id) {
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  rects[id] = ImVec4(a.x, a.y, b.x, b.y);
}

void open_path(View& v, const std::string& path) {
  if (path.empty()) return;
  std::snprintf(v.path, sizeof v.path, "%s", path.c_str());
  v.status = "Opening " + path + "...";
  v.status_error = false;
  v.session.open(path, {}, [&v, path](auto& o) {
    if (o.superseded()) return;
    if (o.ok()) {
      std::error_code ec;
      v.recent.add(std::filesystem::absolute(path, ec).lexically_normal().string());
      v.status.clear();
      v.selected.clear();
      v.layout.reset();
      v.density.reset();
      v.repair.visible = false;  // a repair preview belongs to the checkpoint it was opened on
      v.exporting.path[0] = 0;   // suggested again beside the new input
      v.table_key = 0;
      // A of a finished diff is gone (a running one was superseded by the session): compare the new A with B.
      v.diff.result.reset();
      v.diff.rows.clear();
      v.diff.selected = -1;
      rerun_diff(v);
      v.tab = Tab::Overview;
      v.tab_requested = true;
    } else {
      v.status = "Cannot open " + path + ": " + o.error->message;
      v.status_error = true;
    }
  });
}

void select_param(View& v, const std::string& name) {
  v.selected = name;
  if (const auto ref = v.session.find_param(name)) v.layout.group = ref->group;
}

void follow_analysis(View& v) {
  auto report = v.session.report_ptr();
  if (!report || report == v.followed || v.session.analysing()) return;
  v.followed = report;
  if (!v.layout.shade_chosen) v.layout.shade = session::shade_for(v.session.findings());
  if (v.selected.empty()) select_param(v, v.session.worst_param());
}

void open_repair(View& v, analysis::RepairKind kind) {
  analysis::Finding f;
  f.repair = kind;
  open_repair(v, f);
}

void open_repair(View& v, const analysis::Finding& finding) {
  const auto* cat = v.session.catalog();
  // A source that repairs itself (a self-reporting one, or a Trainer / Accelerate optimizer folder the
  // catalog reads) gets its own repair window.
  if (!cat || v.session.repairing_source()) {
    const sources::Source* source = v.session.repairing_source();
    if (!source || !source->can(sources::Command::Repair)) return;
    RepairWindow& r = v.repair;
    r = RepairWindow{};
    r.visible = true;
    r.of_source = true;
    r.kind = finding.repair;
    r.refresh_fp32 = finding.repair == analysis::RepairKind::RefreshFp32;
    r.reset_optimizer = finding.repair == analysis::RepairKind::ResetOptimizer;
    r.drop_optimizer = finding.repair == analysis::RepairKind::DropOptimizer;
    bool* on[] = {&r.refresh_fp32, &r.reset_optimizer, &r.drop_optimizer};
    for (int a = 0; a < 3; ++a)
      if (const auto why = source->repair_refusal(static_cast<sources::RepairAction>(a), v.session.path())) {
        r.refused[a] = request_text(*why);
        *on[a] = false;
      }
    if (const auto fix = sources::finding_repair(*source, finding.repair, v.session.path()); fix.refused)
      r.finding_refused = request_text(*fix.refused);
    std::snprintf(r.output, sizeof r.output, "%s", v.session.default_source_repair_output().c_str());
    return;
  }
  RepairWindow& r = v.repair;
  r = RepairWindow{};
  r.visible = true;
  r.kind = finding.repair;
  std::snprintf(r.output, sizeof r.output, "%s", session::Session::default_repair_output(*cat).c_str());
  // A fix of several actions (a refresh that runs only with a reset of the optimizer) ticks them all.
  const repair::RepairRequest pre = repair::request_for(finding, *cat);
  r.refresh_fp32 = pre.refresh_fp32;
  r.reset_optimizer = pre.reset_optimizer;
  r.drop_optimizer = pre.drop_optimizer;
  r.restore_model_files = pre.restore_model_files;
  r.repartition = pre.world_size.has_value();
  r.world_size = std::max(1, cat->dp_world_size);
  r.device = static_cast<int>(v.session.settings().device);
}

void compare_with_lp_weights(View& v, const std::string& path) {
  if (!v.session.is_open()) return;
  v.session.set_lp_source(path);
  v.status = "comparing the fp32 partitions with " + path;
  v.status_error = false;
  v.session.analyse();
}

void open_convert(View& v) {
  const auto* cat = v.session.catalog();
  if (!cat) return;
  v.convert = ConvertWindow{};
  v.convert.visible = true;
  std::snprintf(v.convert.output, sizeof v.convert.output, "%s",
                session::Session::default_universal_output(*cat).c_str());
}

std::string display(const View& v, std::string s) {
  if (v.fonts_unicode) return s;
  // ImGui's built-in font is ASCII only: spell out the typographic characters core's messages use.
  for (auto [from, to] : {std::pair<const char*, const char*>{"\xE2\x80\xA6", "..."},
                          {"\xE2\x80\x94", "-"},
                          {"\xE2\x80\x93", "-"},
                          {"\xE2\x89\x88", "~"},
                          {"\xE2\x89\xA5", ">="},
                          {"\xCE\x94", "d"},
                          {"\xC3\x97", "x"}}) {
    for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + std::strlen(to)))
      s.replace(pos, std::strlen(from), to);
  }
  return s;
}

}  // namespace ckptdoc::imgui_view
