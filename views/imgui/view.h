#pragma once
// The ImGui view's state: one core session plus what the panels remember between frames (selection, tab,
// layout zoom, the repair/export/open windows, the diff, cached pictures). Panels draw from session queries
// only; every file access and computation runs as a session job (one file per feature, Tracy-style:
// panel_*.cpp).
#include <imgui.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/session/session.h"
#include "ckptdoc/session/shade_legend.h"
#include "recent_files.h"
#include "texture.h"

namespace ckptdoc::imgui_view {

class Script;

enum class Tab : int { Overview, Layout, Params, Diff, Storage };

struct RepairWindow {
  bool visible = false;
  analysis::RepairKind kind =
      analysis::RepairKind::None;  // a finding's Fix: preselected; None: user's choice
  // The actions chosen; the planner judges every combination.
  bool refresh_fp32 = false, reset_optimizer = false, drop_optimizer = false, repartition = false;
  bool restore_model_files = false;
  char output[1024] = {};
  char target[1024] = {};  // repartition: a template checkpoint
  int world_size = 1;
  int device = 0;         // 0 auto, 1 cpu, 2 cuda
  std::string requested;  // the inputs of the plan last asked for
  session::JobPtr plan_job, run_job;
  std::optional<repair::Plan> plan;
  std::string plan_error;
  std::optional<repair::RepairResult> result;
  std::string run_error;
  std::string cancelled;  // what the window says of a cancelled run; "" when it was not
  // A source's own repair (DCP, Accelerate, Megatron-core; a Trainer or Accelerate optimizer folder;
  // window_source_repair.cpp): no plan, the source's own text (or refusal) once it ran.
  bool of_source = false;
  // Why the source refuses refresh_fp32, reset_optimizer, drop_optimizer on this folder (request_text'd),
  // asked once when the window opens; empty: offered.
  std::string refused[3];
  // Why the finding's Fix that opened the window does not apply to this source (request_text'd); empty: it
  // does, its action ticked, or the window was opened from the menu.
  std::string finding_refused;
  std::string source_text;
  bool source_ok = false;
};

struct ExportWindow {
  bool visible = false;
  int format = 0;  // safetensors, torch, hdf5
  int source = 0;  // fp32, lp
  int dtype = 0;   // default, float32, float16, bfloat16
  bool exclude_frozen = false;
  bool force = false;                                   // replace an existing output file (--force)
  char shard_size[32] = {};                             // a self-reporting source's export: "" one file
  const analysis::Report* source_chosen_for = nullptr;  // the diagnosis the source was last chosen from
  char path[1024] = {};
  session::JobPtr job;
  std::string message;
  std::string warning;  // NaN/Inf written (deepspeed::non_finite_warning)
  bool ok = false;
};

struct ConvertWindow {  // Checkpoint > Convert to universal...
  bool visible = false;
  char output[1024] = {};
  char for_deepspeed[64] = {};  // empty: the checkpoint's own version
  session::JobPtr job;
  std::optional<universal::ConvertResult> result;
  std::string error;      // core's refusal or failure: nothing was written
  std::string cancelled;  // what the window says of a cancelled convert; "" when it was not
};

// What the file picker's choice is for: opening it, the diff's B, or ZeRO-3's 16-bit weights (--lp-source).
enum class PickFor : int { Open, Diff, LpWeights };

struct OpenWindow {
  bool visible = false;
  PickFor pick = PickFor::Open;  // what the chosen path is for
  std::string dir;
  struct Entry {
    std::string name;
    bool is_dir = false;
  };
  std::vector<Entry> entries;
  std::string selected, error;
  session::JobPtr listing;
};

struct LayoutState {
  int group = 0;
  session::Shade shade = session::Shade::Param;  // each analysis sets its worst finding's (follow_analysis)
  bool shade_chosen = false;                     // picked in the menu or by the script: kept for this source
  std::string legend_drawn;  // the map's legend title as the last frame drew it (for the script)
  session::LayoutGeometry geometry;
  bool auto_fit = true;
  uint64_t raster_key = 0;        // hash of what the texture shows
  uint64_t pending_key = 0;       // hash of the picture being computed
  session::LayoutGeometry drawn;  // the geometry the texture was drawn with
  Texture map;
  uint64_t strip_key = 0;
  Texture strip;
  void reset() {  // a new source: fit again, shade by its findings, nothing cached (the textures are reused)
    group = 0;
    shade_chosen = false;
    geometry = {};
    auto_fit = true;
    raster_key = pending_key = strip_key = 0;
  }
};

struct DensityState {
  std::string param;
  session::JobPtr job;
  std::optional<analysis::Density2D> density;
  std::string error;
  uint64_t generation = 0;
  Texture image;
  void reset() {
    param.clear();
    if (job) job->cancel();
    job.reset();
    density.reset();
    error.clear();
    generation = 0;
  }
};

// One row of the Diff tab's table, as drawn: the cells are formatted once per result, not every frame.
struct DiffRow {
  enum class Status { Removed, Added, ShapeChanged, DTypeChanged, Changed, Equal };
  Status status = Status::Equal;
  std::string name, shape, dtype, numel, max_abs, rel_l2, exact, close;  // empty where not compared
  const analysis::TensorDiff* tensor = nullptr;  // in DiffState::result; null for added/removed
  size_t order = 0;  // position in core's order (worst first): the table's unsorted order
};
const char* diff_status_name(DiffRow::Status s);  // "removed", "added", "shape", "dtype", "changed", "equal"

// The Diff tab: the open source (A) against `other` (B), compared by a session job.
struct DiffState {
  std::string other;
  int what = 0;  // fp32, lp, exp_avg, exp_avg_sq
  char atol[32] = "0", rtol[32] = "0";
  session::JobPtr job;
  std::shared_ptr<const analysis::DiffResult> result;
  std::vector<DiffRow> rows;  // in the table's order: sorted by the clicked column, else core's
  bool rows_sorted = false;   // false when rows were rebuilt: sorted again by the table's sort specs
  // Width of every column but the name's, measured once per result: the name gets what is left.
  const analysis::DiffResult* measured = nullptr;
  float numbers_width = 0;
  std::string summary, error;
  bool cancelled = false;
  int selected = -1;  // row
};

// Screen rectangles of named widgets, recorded while drawing: the script clicks them like a user would.
struct WidgetRects {
  std::map<std::string, ImVec4> rects;  // x0, y0, x1, y1
  void record(const std::string& id);   // the last item's rectangle
};

struct View {
  session::Session session;
  Tab tab = Tab::Overview;
  bool tab_requested = false;  // switch the tab bar to `tab` on the next frame
  std::string selected;        // param name
  char path[1024] = {};        // the path field
  char filter[128] = {};
  std::string status;  // last notice (open failures), shown in the header
  bool status_error = false;
  RecentFiles recent;
  RepairWindow repair;
  ExportWindow exporting;
  ConvertWindow convert;
  OpenWindow open_window;
  LayoutState layout;
  DensityState density;
  DiffState diff;
  // The params table: rows sorted once per analysis / sort / filter change, not every frame.
  std::vector<int> table_rows;
  uint64_t table_key = 0;
  bool show_jobs = false;
  bool scroll_table = false;  // --bench: scroll the params table every frame
  WidgetRects widgets;
  // The Overview's summary rows (label, value) as last drawn: the script's save-summary writes them.
  std::vector<std::pair<std::string, std::string>> summary_rows;
  bool fonts_unicode = false;  // DejaVu loaded: core's messages render as they are
  bool quit = false;
  std::shared_ptr<const analysis::Report> followed;  // the analysis follow_analysis last acted on
};

// Starts opening `path` (the path field, a recent entry, a drop, the file dialog).
void open_path(View& v, const std::string& path);
// Selects a param everywhere (table, layout map, strip, plots).
void select_param(View& v, const std::string& name);
// Once per new analysis: shades the layout by its worst finding (unless a shade was chosen) and selects the
// worst param when none is, so no picture opens on a neutral or empty view.
void follow_analysis(View& v);
// Opens the repair window with a finding's repair preselected (None: Checkpoint > Repair..., nothing chosen).
void open_repair(View& v, analysis::RepairKind kind);
void open_repair(View& v, const analysis::Finding& finding);  // its Fix: every action the fix runs
// Opens the convert window with the default output (<input>-universal).
void open_convert(View& v);
// ZeRO-3: re-analyses comparing the fp32 partitions with 16-bit weights saved at `path` (diagnose
// --lp-source).
void compare_with_lp_weights(View& v, const std::string& path);
// Compares the open source with `other` (sets B, shows the Diff tab, starts the diff job).
void compare_with(View& v, const std::string& other);
// Starts the comparison again with the Diff tab's settings (superseding a running one); false when there is
// nothing to compare or the tolerance is not a number >= 0.
bool rerun_diff(View& v);
// Writes the Diff tab's rows as drawn (tab-separated, a header line first); false when it cannot.
bool save_diff_rows(const View& v, const std::string& file);
// Text as the loaded font can draw it (ASCII stand-ins without DejaVu).
std::string display(const View& v, std::string text);

// Panels, one file each.
void draw_header(View& v);
void draw_overview(View& v);
void draw_layout(View& v);
void draw_params(View& v);
void draw_plots(View& v);
void draw_diff(View& v);
// The Storage tab (panel_storage.cpp): a self-reporting source's files to scale of their bytes, and its keys.
void draw_storage(View& v);
void draw_storage_summary(const sources::StorageMap& map);
// The storage map's boxes as drawn, one per line: file, present, key, offset, length (tab-separated).
bool save_storage_rows(const View& v, const std::string& file);
void draw_strip(View& v, const char* id, float height);
// A legend line: its title, then a swatch and a word for each colour.
void draw_legend(const session::Legend& legend, bool title = true);
void draw_repair_window(View& v);
void draw_source_repair_window(View& v);  // draw_repair_window's, for a self-reporting source
void draw_export_window(View& v);
void draw_convert_window(View& v);
void draw_open_window(View& v);
void draw_jobs(View& v);

// A log-magnitude histogram (panel_plots.cpp): `second`, when given, in another colour, named in the tooltip.
void log_histogram(const char* id, const char* title, const char* xlabel, const LogHistogram& first,
                   const LogHistogram* second, ImVec2 size, const char* second_name = "negative");

}  // namespace ckptdoc::imgui_view
