// The repair window for a source that repairs itself (a DCP, Accelerate or Megatron-core folder; a Trainer or
// Accelerate optimizer folder the catalog reads), as `ckptdoc repair FOLDER -o OUT` runs it
// (Session::repair_source): the actions (one the source refuses on this folder off, with why), the output
// folder, and what the source's repair said, or its refusal in the words of these controls; while it runs,
// its stage, the bytes copied (then the records rewritten) and Cancel (nothing is published when cancelled).
#include <cstdio>
#include <string>

#include "ckptdoc/sources/source.h"
#include "view.h"

namespace ckptdoc::imgui_view {

void draw_source_repair_window(View& v) {
  RepairWindow& r = v.repair;
  if (!v.session.repairing_source()) {  // another source was opened meanwhile
    r.visible = false;
    return;
  }
  ImGui::SetNextWindowSize(ImVec2(680, 320), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin("Repair###repair", &r.visible)) {
    ImGui::End();
    return;
  }
  const bool running = r.run_job && !r.run_job->finished();
  ImGui::TextWrapped(
      "Nothing is written until you press Repair. The input stays untouched; the repaired copy goes into a "
      "new folder, every byte the input's except what the repair changes, and is read back to check it.");
  if (!r.finding_refused.empty()) {  // the Fix that opened it cannot be run here: said first
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(ImVec4(0.95f, 0.75f, 0.3f, 1), "%s", display(v, r.finding_refused).c_str());
    ImGui::PopTextWrapPos();
    v.widgets.record("repair.finding-refused");
  }
  ImGui::BeginDisabled(running);
  ImGui::SetNextItemWidth(-120);
  ImGui::InputText("output folder", r.output, sizeof r.output);
  v.widgets.record("repair.output");
  // The labels are the ones the core's refusals name (session/request_field_labels.cpp).
  bool* on[] = {&r.refresh_fp32, &r.reset_optimizer, &r.drop_optimizer};
  const char* labels[] = {"Refresh fp32 masters from the 16-bit weights",
                          "Reset optimizer state: zero moments, step 0",
                          "Drop optimizer state: its keys left out"};
  const char* ids[] = {"repair.refresh-fp32", "repair.reset-optimizer", "repair.drop-optimizer"};
  for (int a = 0; a < 3; ++a) {
    // An action the source refuses on this folder is left off, with its reason under it.
    const bool refused = !r.refused[a].empty();
    ImGui::BeginDisabled(refused);
    ImGui::Checkbox(labels[a], on[a]);
    ImGui::EndDisabled();
    if (refused && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("%s", display(v, r.refused[a]).c_str());  // the reason, as the Qt view's tooltip
    v.widgets.record(ids[a]);
    if (refused) {
      ImGui::Indent();
      ImGui::PushTextWrapPos(0);
      ImGui::TextDisabled("%s", display(v, r.refused[a]).c_str());
      ImGui::PopTextWrapPos();
      ImGui::Unindent();
      v.widgets.record(std::string(ids[a]) + ".refused");
    }
  }
  ImGui::EndDisabled();
  if (running) {
    ImGui::ProgressBar(static_cast<float>(r.run_job->fraction()), ImVec2(-120, 0),
                       display(v, r.run_job->stage()).c_str());
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) r.run_job->cancel();
    v.widgets.record("repair.cancel");
  } else {
    if (ImGui::Button("Repair")) {
      sources::RepairRequest request;
      request.output = r.output;
      request.refresh_fp32 = r.refresh_fp32;
      request.reset_optimizer = r.reset_optimizer;
      request.drop_optimizer = r.drop_optimizer;
      r.source_text.clear();
      r.run_job = v.session.repair_source(request, [&v](session::Outcome<sources::Outcome>& done) {
        v.repair.source_ok = done.ok();
        v.repair.source_text = done.ok() ? done.value->text
                               : done.error->kind == session::ErrorKind::Cancelled
                                   ? session::cancelled_text(session::JobKind::Repair)
                                   : "Repair failed: " + done.error->message;
      });
    }
    v.widgets.record("repair.run");
    ImGui::SameLine();
    if (ImGui::Button("Close")) r.visible = false;
  }
  if (!r.source_text.empty())
    ImGui::TextColored(r.source_ok ? ImVec4(0.35f, 0.8f, 0.4f, 1) : ImVec4(0.95f, 0.4f, 0.35f, 1), "%s",
                       display(v, r.source_text).c_str());
  ImGui::End();
}

}  // namespace ckptdoc::imgui_view
