// The export window: format, source (fp32 masters as zero_to_fp32.py, or the lp weights), dtype, frozen
// params, file; runs deepspeed::export_weights as a session job with progress and cancel. For a
// self-reporting source (DCP, Accelerate, Megatron-core): format, shards and file; its own export.
#include <cstdio>

#include "ckptdoc/analysis/export_gate.h"
#include "ckptdoc/sources/deepspeed/export_warning.h"
#include "ckptdoc/sources/source.h"
#include "ckptdoc/weights/shards.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {
const deepspeed::ExportFormat kFormats[] = {deepspeed::ExportFormat::Safetensors,
                                            deepspeed::ExportFormat::Torch, deepspeed::ExportFormat::Hdf5};

void show_outcome(const ExportWindow& e, View& v) {
  if (!e.message.empty())
    ImGui::TextColored(e.ok ? ImVec4(0.35f, 0.8f, 0.4f, 1) : ImVec4(0.95f, 0.4f, 0.35f, 1), "%s",
                       display(v, e.message).c_str());
  if (!e.warning.empty())  // written, but not weights a model can use
    ImGui::TextColored(ImVec4(1.0f, 0.6f, 0.2f, 1), "Warning: %s", display(v, e.warning).c_str());
}

// A self-reporting source's export, as `ckptdoc export FOLDER -o FILE` runs it, with the bytes written and
// Cancel (nothing is published when cancelled).
void draw_source_export_window(View& v, const sources::Source& source) {
  ExportWindow& e = v.exporting;
  const bool torch_ok = source.exports_torch();
  if (!torch_ok) e.format = 0;
  if (!e.path[0])
    std::snprintf(e.path, sizeof e.path, "%s", v.session.default_source_export_path(e.format == 1).c_str());
  ImGui::SetNextWindowSize(ImVec2(640, 240), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin("Export weights", &e.visible)) {
    ImGui::End();
    return;
  }
  const bool running = e.job && !e.job->finished();
  ImGui::BeginDisabled(running);
  const char* formats[] = {"safetensors", "torch (.bin)"};
  ImGui::SetNextItemWidth(220);
  if (ImGui::Combo("format", &e.format, formats, torch_ok ? 2 : 1))
    std::snprintf(e.path, sizeof e.path, "%s", v.session.default_source_export_path(e.format == 1).c_str());
  ImGui::SetNextItemWidth(220);
  ImGui::InputTextWithHint("shards", "one file; or a size such as 5GB", e.shard_size, sizeof e.shard_size);
  v.widgets.record("export.shards");
  ImGui::SetNextItemWidth(-60);
  ImGui::InputText("file", e.path, sizeof e.path);
  v.widgets.record("export.path");
  ImGui::Checkbox("replace an existing file", &e.force);
  ImGui::EndDisabled();
  if (running) {
    ImGui::ProgressBar(static_cast<float>(e.job->fraction()), ImVec2(-120, 0),
                       display(v, e.job->stage()).c_str());
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) e.job->cancel();
    v.widgets.record("export.cancel");
  } else {
    if (ImGui::Button("Export")) {
      sources::ExportRequest request;
      request.output = e.path;
      request.torch = e.format == 1;
      request.force = e.force;
      e.message.clear();
      e.warning.clear();
      try {
        if (e.shard_size[0])
          request.max_shard_size = weights::parse_shard_size(e.shard_size, "the shard size");
        e.job = v.session.export_source(request, [&v](session::Outcome<sources::ExportOutcome>& r) {
          v.exporting.ok = r.ok();
          if (!r.ok()) {
            v.exporting.message = r.error->kind == session::ErrorKind::Cancelled
                                      ? session::cancelled_text(session::JobKind::Export)
                                      : "Export failed: " + r.error->message;
            return;
          }
          v.exporting.message = "Exported " + std::to_string(r.value->tensors) + " tensors to " +
                                r.value->path + "\n" + r.value->text;
          deepspeed::ExportResult said;  // the warning every export gives
          said.path = r.value->path;
          said.tensors = r.value->tensors;
          said.non_finite = r.value->non_finite;
          v.exporting.warning = deepspeed::non_finite_warning(said);
        });
      } catch (const std::exception& ex) {
        e.ok = false;
        e.message = ex.what();
      }
    }
    v.widgets.record("export.run");
    ImGui::SameLine();
    if (ImGui::Button("Close")) e.visible = false;
  }
  show_outcome(e, v);
  ImGui::End();
}

}  // namespace

void draw_export_window(View& v) {
  ExportWindow& e = v.exporting;
  if (!e.visible) return;
  const auto* cat = v.session.catalog();
  if (!cat) {
    if (const sources::Source* source = v.session.storage_source())
      return draw_source_export_window(v, *source);
    e.visible = false;
    return;
  }
  if (!e.path[0])
    std::snprintf(e.path, sizeof e.path, "%s",
                  session::Session::default_export_path(*cat, kFormats[e.format]).c_str());
  ImGui::SetNextWindowSize(ImVec2(640, 300), ImGuiCond_FirstUseEver);
  if (!ImGui::Begin("Export weights", &e.visible)) {
    ImGui::End();
    return;
  }
  const bool running = e.job && !e.job->finished();
  ImGui::BeginDisabled(running);
  const char* formats[] = {"safetensors", "torch (.bin)", "HDF5 (.h5)"};
  ImGui::SetNextItemWidth(220);
  if (ImGui::Combo("format", &e.format, formats, 3))
    std::snprintf(e.path, sizeof e.path, "%s",
                  session::Session::default_export_path(*cat, kFormats[e.format]).c_str());
  const char* sources[] = {"fp32 masters (as zero_to_fp32.py)", "lp weights (module state dict)"};
  // Stale masters (the diagnosis says so) are not what a user wants exported: the lp weights are chosen, once
  // per diagnosis, and the choice is explained; choosing the masters back is allowed and said in red.
  const analysis::Report* report = v.session.report();
  const auto stale = report ? analysis::stale_masters_reason(*report) : std::nullopt;
  if (report != e.source_chosen_for) {
    e.source_chosen_for = report;
    if (stale) e.source = 1;
  }
  ImGui::SetNextItemWidth(300);
  ImGui::Combo("source", &e.source, sources, 2);
  if (stale)
    ImGui::TextColored(e.source ? ImVec4(0.95f, 0.75f, 0.3f, 1) : ImVec4(0.95f, 0.4f, 0.35f, 1), "%s",
                       (e.source ? "lp weights chosen: " + *stale + "."
                                 : "Exports the stale masters: " + *stale + ". Fix the finding first.")
                           .c_str());
  const char* dtypes[] = {"default", "float32", "float16", "bfloat16"};
  ImGui::SetNextItemWidth(160);
  ImGui::Combo("dtype", &e.dtype, dtypes, 4);
  ImGui::Checkbox("leave out frozen params", &e.exclude_frozen);
  ImGui::SetNextItemWidth(-60);
  ImGui::InputText("file", e.path, sizeof e.path);
  v.widgets.record("export.path");
  ImGui::Checkbox("replace an existing file", &e.force);
  ImGui::EndDisabled();
  if (running) {
    ImGui::ProgressBar(static_cast<float>(e.job->fraction()), ImVec2(-120, 0),
                       display(v, e.job->stage()).c_str());
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) e.job->cancel();
  } else {
    if (ImGui::Button("Export")) {
      deepspeed::ExportOptions o;
      o.format = kFormats[e.format];
      o.source = e.source ? deepspeed::ExportSource::Lp : deepspeed::ExportSource::Fp32;
      if (e.dtype) o.dtype = dtype_from_name(dtypes[e.dtype]);
      o.exclude_frozen = e.exclude_frozen;
      o.force = e.force;
      o.device = v.session.settings().device;
      e.message.clear();
      e.job = v.session.export_weights(e.path, o, [&v](session::Outcome<deepspeed::ExportResult>& r) {
        v.exporting.ok = r.ok();
        v.exporting.warning.clear();
        if (r.ok()) {
          v.exporting.message = "Exported " + std::to_string(r.value->tensors) + " tensors (" +
                                std::to_string(r.value->bytes) + " bytes) to " + r.value->path;
          v.exporting.warning = deepspeed::non_finite_warning(*r.value);
        } else
          v.exporting.message = r.error->kind == session::ErrorKind::Cancelled
                                    ? session::cancelled_text(session::JobKind::Export)
                                    : "Export failed: " + r.error->message;
      });
    }
    v.widgets.record("export.run");
    ImGui::SameLine();
    if (ImGui::Button("Close")) e.visible = false;
  }
  show_outcome(e, v);
  ImGui::End();
}

}  // namespace ckptdoc::imgui_view
