// The convert window (Checkpoint > Convert to universal...): output folder, the DeepSpeed version to write
// for, what that version's loader reads and its known gaps (universal::target_version), then the conversion
// as a session job with progress and cancel, and core's verification. Whether the checkpoint converts at all
// is core's to say when it runs; nothing is written then.
#include <cstdio>
#include <string>

#include "ckptdoc/error.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

void start_convert(View& v) {
  ConvertWindow& c = v.convert;
  c.result.reset();
  c.error.clear();
  c.cancelled.clear();
  universal::ToUniversalOptions o;
  o.for_deepspeed = c.for_deepspeed;
  o.device = v.session.settings().device;
  c.job = v.session.convert_to_universal(c.output, o, [&v](session::Outcome<universal::ConvertResult>& r) {
    if (r.ok())
      v.convert.result = std::move(*r.value);
    else if (r.error->kind == session::ErrorKind::Cancelled)
      v.convert.cancelled = session::cancelled_text(session::JobKind::Convert);  // thrown before publishing
    else
      v.convert.error = r.error->message;
  });
}

// The summary of what will be written; false when core refuses the target version.
bool summary(View& v, const model::Catalog& cat) {
  const std::string version = v.convert.for_deepspeed[0] ? v.convert.for_deepspeed : cat.writer_version;
  try {
    const universal::TargetVersion t = universal::target_version(version);
    ImGui::TextWrapped("For DeepSpeed %s: %s", t.version.c_str(),
                       t.loader == universal::LoaderKind::StepFiles
                           ? "fp32, exp_avg, exp_avg_sq and step per param, optimizer_state.pt"
                           : "fp32, exp_avg, exp_avg_sq per param; the Adam step from the iteration");
    for (const auto& caveat : t.caveats) ImGui::TextWrapped("caveat: %s", display(v, caveat).c_str());
    return true;
  } catch (const Error& e) {
    ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "This conversion cannot run: %s",
                       display(v, e.what()).c_str());
    return false;
  }
}

void result_text(View& v) {
  const ConvertWindow& c = v.convert;
  if (!c.cancelled.empty()) {
    ImGui::TextDisabled("%s", c.cancelled.c_str());
    return;
  }
  if (!c.error.empty()) {
    ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "Not converted. Nothing was written.");
    ImGui::TextWrapped("%s", display(v, c.error).c_str());
    return;
  }
  if (!c.result) return;
  const auto& r = *c.result;
  if (r.verified())
    ImGui::TextColored(ImVec4(0.35f, 0.8f, 0.4f, 1), "Converted and verified: %zu params in %zu files.",
                       r.params, r.files);
  else
    ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "Written, but verification failed.");
  ImGui::TextUnformatted((r.output + "/" + r.tag).c_str());
  for (const auto& a : r.assumptions) ImGui::TextWrapped("Assumed: %s", display(v, a).c_str());
  for (const auto& n : r.notes) ImGui::TextWrapped("Note: %s", display(v, n).c_str());
  for (const auto& f : r.verify_failures) ImGui::TextWrapped("check failed: %s", display(v, f).c_str());
  if (ImGui::Button("Open converted checkpoint")) {
    const std::string out = r.output;
    v.convert.visible = false;
    open_path(v, out);
  }
}

}  // namespace

void draw_convert_window(View& v) {
  ConvertWindow& c = v.convert;
  if (!c.visible) return;
  const model::Catalog* cat = v.session.catalog();
  if (!cat) {
    c.visible = false;
    return;
  }
  ImGui::SetNextWindowSize(ImVec2(700, 380), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin("Convert to a universal checkpoint###convert", &c.visible)) {
    ImGui::End();
    return;
  }
  const bool running = c.job && !c.job->finished();
  ImGui::TextWrapped(
      "Writes the folder DeepSpeed's ds_to_universal.py writes, loadable with load_universal on any "
      "data-parallel size. The input stays untouched; the output is verified by re-opening it.");
  ImGui::BeginDisabled(running);
  ImGui::SetNextItemWidth(-160);
  ImGui::InputText("output folder", c.output, sizeof c.output);
  ImGui::SetNextItemWidth(200);
  ImGui::InputTextWithHint("for DeepSpeed", cat->writer_version.c_str(), c.for_deepspeed,
                           sizeof c.for_deepspeed);
  ImGui::EndDisabled();
  ImGui::Separator();
  const bool can_run = summary(v, *cat) && c.output[0];
  ImGui::Separator();
  if (running) {
    const auto& j = *c.job;
    ImGui::ProgressBar(static_cast<float>(j.fraction()), ImVec2(-120, 0), display(v, j.stage()).c_str());
    ImGui::SameLine();
    if (ImGui::Button(j.cancel_requested() ? "Cancelling..." : "Cancel")) c.job->cancel();
    v.widgets.record("convert.cancel");
  } else {
    ImGui::BeginDisabled(!can_run);
    if (ImGui::Button("Convert")) start_convert(v);
    v.widgets.record("convert.run");
    ImGui::EndDisabled();
    ImGui::SameLine();
    if (ImGui::Button("Close")) c.visible = false;
  }
  result_text(v);
  ImGui::End();
}

}  // namespace ckptdoc::imgui_view
