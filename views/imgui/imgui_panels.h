#pragma once
// The ImGui panels, one function each, drawing from the shared view state. No file access here: the state
// holds what core returned.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::imgui_view {

struct ViewState {
  std::string path;
  std::shared_ptr<const deepspeed::Checkpoint> checkpoint;
  std::string open_error;
  // Analysis on a worker; `report` is moved in by the worker before `done` is set.
  Progress progress;
  std::thread worker;
  std::atomic<bool> done{false};
  std::optional<analysis::Report> report;
  std::string analysis_error;
  // UI state.
  int group = 0;
  int selected_param = -1;  // index in the current group
  std::string selected_name;
  char filter[128] = {};
  double zoom = 1.0;  // 1 = whole partition fits
  double pan = 0.0;   // first visible element
};

void draw_header(ViewState& s);
void draw_findings(ViewState& s);
void draw_param_table(ViewState& s);
void draw_layout(ViewState& s);

}  // namespace ckptdoc::imgui_view
