// The repair preview window: output folder, device, the actions as check boxes (a finding's Fix preselects
// its kind; a re-partition takes a new world size or a template checkpoint), the plan core computes (a
// session job, asked again whenever a field changes: the newest request supersedes the one in flight), Repair
// with progress and cancel, and core's verification of the output.
#include <cstdio>
#include <string>

#include "ckptdoc/repair/plan.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

const char* title_of(analysis::RepairKind k) {
  switch (k) {
    case analysis::RepairKind::RefreshFp32:
      return "Repair preview: refresh fp32 masters";
    case analysis::RepairKind::ResetOptimizer:
      return "Repair preview: reset optimizer state";
    case analysis::RepairKind::DropOptimizer:
      return "Repair preview: drop optimizer state";
    case analysis::RepairKind::Repartition:
      return "Repair preview: re-partition";
    case analysis::RepairKind::RestoreModelFiles:
      return "Repair preview: restore model files";
    case analysis::RepairKind::None:
      break;
  }
  return "Repair";
}

repair::RepairRequest request_of(const View& v) {
  const RepairWindow& r = v.repair;
  repair::RepairRequest rq;
  rq.device = static_cast<DeviceKind>(r.device);
  rq.refresh_fp32 = r.refresh_fp32;
  rq.reset_optimizer = r.reset_optimizer;
  rq.drop_optimizer = r.drop_optimizer;
  rq.restore_model_files = r.restore_model_files;
  if (r.repartition) {
    if (r.target[0])
      rq.target = r.target;
    else
      rq.world_size = r.world_size;
  }
  return rq;
}

std::string inputs_of(const RepairWindow& r) {
  return std::string(r.output) + "|" + r.target + "|" + std::to_string(r.world_size) + "|" +
         std::to_string(r.device) + "|" + char('0' + r.refresh_fp32) + char('0' + r.reset_optimizer) +
         char('0' + r.drop_optimizer) + char('0' + r.repartition) + char('0' + r.restore_model_files);
}

void request_plan(View& v) {
  RepairWindow& r = v.repair;
  r.requested = inputs_of(r);
  r.plan.reset();
  r.plan_error.clear();
  const std::string asked = r.requested;
  r.plan_job = v.session.plan_repair(r.output, request_of(v), [&v, asked](session::Outcome<repair::Plan>& o) {
    if (o.superseded() || v.repair.requested != asked) return;
    if (o.ok()) {
      // Said before anything is written, as the CLI's plan does: errors this choice leaves, and what clears
      // them.
      if (const analysis::Report* in = v.session.report())
        for (auto& line : repair::errors_left_by(*in, request_of(v))) o.value->warnings.push_back(line);
      v.repair.plan = std::move(*o.value);
    } else {
      v.repair.plan_error = o.error->message;
    }
  });
}

void start_repair(View& v) {
  RepairWindow& r = v.repair;
  r.result.reset();
  r.run_error.clear();
  r.cancelled.clear();
  r.run_job = v.session.run_repair(r.output, request_of(v), [&v](session::Outcome<repair::RepairResult>& o) {
    if (o.ok())
      v.repair.result = std::move(*o.value);
    else if (o.error->kind == session::ErrorKind::Cancelled)
      v.repair.cancelled = session::cancelled_text(session::JobKind::Repair);
    else
      v.repair.run_error = o.error->message;
  });
}

void result_text(View& v) {
  const RepairWindow& r = v.repair;
  if (!r.cancelled.empty()) {
    ImGui::TextDisabled("%s", r.cancelled.c_str());
    return;
  }
  if (!r.run_error.empty()) {
    ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "Repair failed. Nothing was written.");
    ImGui::TextWrapped("%s", display(v, r.run_error).c_str());
    return;
  }
  if (!r.result) return;
  const auto& res = *r.result;
  const bool clean = res.verified_clean && res.invariant_failures.empty();
  if (clean)
    ImGui::TextColored(
        ImVec4(0.35f, 0.8f, 0.4f, 1),
        "Repaired and verified: the output diagnoses clean and DeepSpeed's loader invariants hold.");
  else
    ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "Written, but verification found problems.");
  v.widgets.record(clean ? "repair.clean" : "repair.problems");
  ImGui::TextUnformatted(res.output.c_str());
  for (const auto& f : res.verification.findings)
    ImGui::TextWrapped("%s %s: %s", std::string(analysis::severity_name(f.severity)).c_str(), f.code.c_str(),
                       display(v, f.message).c_str());
  for (const auto& inv : res.invariant_failures) ImGui::TextWrapped("invariant: %s", inv.c_str());
  if (ImGui::Button("Open repaired checkpoint")) {
    const std::string out = res.output;
    v.repair.visible = false;
    open_path(v, out);
  }
  v.widgets.record("repair.open");
}

}  // namespace

void draw_repair_window(View& v) {
  RepairWindow& r = v.repair;
  if (!r.visible) return;
  if (!v.session.is_open()) {
    r.visible = false;
    return;
  }
  if (r.of_source) return draw_source_repair_window(v);
  ImGui::SetNextWindowSize(ImVec2(760, 560), ImGuiCond_FirstUseEver);
  const std::string title = std::string(title_of(r.kind)) + "###repair";
  if (!ImGui::Begin(title.c_str(), &r.visible)) {
    ImGui::End();
    return;
  }
  const bool running = r.run_job && !r.run_job->finished();
  ImGui::TextWrapped(
      "Nothing is written until you press Repair. The input stays untouched; the repaired checkpoint "
      "goes into a new folder and is verified by diagnosing it again.");
  ImGui::BeginDisabled(running);
  ImGui::SetNextItemWidth(-120);
  ImGui::InputText("output folder", r.output, sizeof r.output);
  v.widgets.record("repair.output");
  const char* devices[] = {"Auto (CUDA when available)", "CPU", "CUDA"};
  ImGui::SetNextItemWidth(260);
  ImGui::Combo("device", &r.device, devices, 3);
  auto action = [&](const char* label, bool* on, const char* id) {
    ImGui::Checkbox(label, on);
    v.widgets.record(id);
  };
  action("Refresh fp32 masters from the 16-bit weights (--refresh-fp32)", &r.refresh_fp32,
         "repair.refresh-fp32");
  action("Reset optimizer state: empty moments, step 0 (--reset-optimizer)", &r.reset_optimizer,
         "repair.reset-optimizer");
  action("Drop optimizer state: a weights-only checkpoint (--drop-optimizer)", &r.drop_optimizer,
         "repair.drop-optimizer");
  action("Restore missing ZeRO-3 model files as copies of one that is there (--restore-model-files)",
         &r.restore_model_files, "repair.restore-model-files");
  action("Re-partition (--repartition)", &r.repartition, "repair.repartition");
  if (r.repartition) {
    ImGui::Indent();
    ImGui::SetNextItemWidth(140);
    ImGui::BeginDisabled(r.target[0] != 0);
    ImGui::InputInt("new data-parallel size", &r.world_size);
    ImGui::EndDisabled();
    r.world_size = std::max(1, r.world_size);
    ImGui::SetNextItemWidth(-220);
    ImGui::InputTextWithHint("template checkpoint", "or: a checkpoint whose layout to take (--target)",
                             r.target, sizeof r.target);
    v.widgets.record("repair.target");
    ImGui::Unindent();
  }
  ImGui::EndDisabled();
  if (inputs_of(r) != r.requested && !running) request_plan(v);

  ImGui::Separator();
  ImGui::TextUnformatted("Plan");
  const float plan_h = ImGui::GetContentRegionAvail().y - ImGui::GetTextLineHeightWithSpacing() * 7;
  ImGui::BeginChild("plan", ImVec2(0, std::max(80.0f, plan_h)), true, ImGuiWindowFlags_HorizontalScrollbar);
  if (r.plan)
    ImGui::TextUnformatted(r.plan->text().c_str());
  else if (!r.plan_error.empty())
    ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "This repair cannot run: %s",
                       display(v, r.plan_error).c_str());
  else
    ImGui::TextDisabled("Planning...");
  ImGui::EndChild();

  if (running) {
    const auto& j = *r.run_job;
    ImGui::ProgressBar(static_cast<float>(j.fraction()), ImVec2(-120, 0), display(v, j.stage()).c_str());
    ImGui::SameLine();
    if (ImGui::Button(j.cancel_requested() ? "Cancelling..." : "Cancel")) r.run_job->cancel();
    v.widgets.record("repair.cancel");
  } else {
    ImGui::BeginDisabled(!r.plan);
    if (ImGui::Button("Repair")) start_repair(v);
    v.widgets.record("repair.run");
    ImGui::EndDisabled();
    ImGui::SameLine();
    if (ImGui::Button("Close")) r.visible = false;
  }
  result_text(v);
  ImGui::End();
}

}  // namespace ckptdoc::imgui_view
