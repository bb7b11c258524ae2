// The Diff tab: the open source (A) against another (B) tensor by tensor, as `ckptdoc diff` and the Qt app's
// Diff tab show it. The comparison is a session job (progress and cancel here; a new request supersedes the
// running one); the table lists the rows worst first, as core ordered them; the selected row shows its
// numbers and the histogram of log10 |A-B| (A > B and B > A apart).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>

#include "ckptdoc/format/shape_text.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

constexpr analysis::DiffWhat kWhats[] = {analysis::DiffWhat::Fp32, analysis::DiffWhat::Lp,
                                         analysis::DiffWhat::ExpAvg, analysis::DiffWhat::ExpAvgSq};

std::string number(double x, int digits) {
  if (std::isinf(x)) return "inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  return buf;
}

std::string percent(double f) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f %%", f * 100.0);
  return buf;
}

// Parses a tolerance field: a number >= 0, else nullopt.
std::optional<double> tolerance(const char* text) {
  char* end = nullptr;
  const double x = std::strtod(text, &end);
  if (end == text || *end != 0 || !(x >= 0)) return std::nullopt;
  return x;
}

DiffRow row_of(const analysis::TensorDiff& d, DiffRow::Status status) {
  DiffRow r;
  r.status = status;
  r.name = d.name;
  r.tensor = &d;
  r.shape =
      d.shape_a == d.shape_b ? shape_text(d.shape_a) : shape_text(d.shape_a) + " -> " + shape_text(d.shape_b);
  r.dtype = std::string(dtype_name(d.dtype_a));
  if (d.dtype_a != d.dtype_b) r.dtype += " -> " + std::string(dtype_name(d.dtype_b));
  if (status == DiffRow::Status::ShapeChanged) return r;  // not compared
  r.numel = std::to_string(d.numel);
  r.max_abs = number(d.max_abs, 4);
  r.rel_l2 = number(d.rel_l2(), 4);
  r.exact = percent(d.exact_fraction());
  r.close = percent(d.numel ? static_cast<double>(d.close) / static_cast<double>(d.numel) : 1.0);
  return r;
}

// Removed, added, shape-changed, then the compared tensors in core's order (worst first).
std::vector<DiffRow> rows_of(const analysis::DiffResult& r) {
  std::vector<DiffRow> rows;
  for (const auto& n : r.removed)
    rows.push_back({DiffRow::Status::Removed, n, {}, {}, {}, {}, {}, {}, {}, nullptr});
  for (const auto& n : r.added)
    rows.push_back({DiffRow::Status::Added, n, {}, {}, {}, {}, {}, {}, {}, nullptr});
  for (const auto& d : r.shape_changed) rows.push_back(row_of(d, DiffRow::Status::ShapeChanged));
  for (const auto& d :
       r.compared)  // values first: moved values are "changed" even when the dtype changed too
    rows.push_back(row_of(d, !d.values_equal()        ? DiffRow::Status::Changed
                             : d.dtype_a != d.dtype_b ? DiffRow::Status::DTypeChanged
                                                      : DiffRow::Status::Equal));
  for (size_t i = 0; i < rows.size(); ++i) rows[i].order = i;
  return rows;
}

// The table's columns: header, script id (a header is clicked as "diff.col.<id>"), whether the first click
// sorts it largest first.
struct Column {
  const char* header;
  const char* id;
  bool descending_first;
};
constexpr Column kColumns[] = {
    {"Tensor", "tensor", false}, {"Status", "status", false},     {"Shape", "shape", false},
    {"Dtype", "dtype", false},   {"Numel", "numel", true},        {"max |A-B|", "max_abs", true},
    {"rel L2", "rel_l2", true},  {"Exact equal", "exact", false}, {"Within tol.", "close", false}};
constexpr int kColumnCount = static_cast<int>(std::size(kColumns));

// The number a numeric column sorts by; none for rows whose values were not compared (they sort last). NaN
// sorts as the largest difference.
std::optional<double> sort_number(const DiffRow& r, int column) {
  if (!r.tensor || r.status == DiffRow::Status::ShapeChanged) return std::nullopt;
  const auto& t = *r.tensor;
  double x = 0;
  switch (column) {
    case 4:
      x = static_cast<double>(t.numel);
      break;
    case 5:
      x = t.max_abs;
      break;
    case 6:
      x = t.rel_l2();
      break;
    case 7:
      x = t.exact_fraction();
      break;
    case 8:
      x = t.numel ? static_cast<double>(t.close) / static_cast<double>(t.numel) : 1.0;
      break;
    default:
      return std::nullopt;
  }
  return std::isnan(x) ? std::numeric_limits<double>::infinity() : x;
}

// Sorts the rows by the table's sort spec (none: core's order), keeping the selected tensor selected.
void sort_rows(DiffState& d, const ImGuiTableSortSpecs* specs) {
  const std::string selected = d.selected >= 0 && d.selected < static_cast<int>(d.rows.size())
                                   ? d.rows[static_cast<size_t>(d.selected)].name
                                   : "";
  const ImGuiTableColumnSortSpecs* s = specs && specs->SpecsCount > 0 ? &specs->Specs[0] : nullptr;
  std::stable_sort(d.rows.begin(), d.rows.end(), [s](const DiffRow& a, const DiffRow& b) {
    if (!s) return a.order < b.order;
    const bool desc = s->SortDirection == ImGuiSortDirection_Descending;
    const int c = s->ColumnIndex;
    if (c >= 4) {
      const auto x = sort_number(a, c), y = sort_number(b, c);
      if (x.has_value() != y.has_value()) return x.has_value();  // not compared: last either way
      if (x && *x != *y) return desc ? *x > *y : *x < *y;
      return a.order < b.order;
    }
    const int cmp = c == 0   ? a.name.compare(b.name)
                    : c == 1 ? static_cast<int>(a.status) - static_cast<int>(b.status)
                    : c == 2 ? a.shape.compare(b.shape)
                             : a.dtype.compare(b.dtype);
    if (cmp != 0) return desc ? cmp > 0 : cmp < 0;
    return a.order < b.order;
  });
  d.selected = -1;
  for (size_t i = 0; i < d.rows.size(); ++i)
    if (!selected.empty() && d.rows[i].name == selected) d.selected = static_cast<int>(i);
  d.rows_sorted = true;
}

std::string summary_of(const analysis::DiffResult& r) {
  size_t different = 0;
  for (const auto& d : r.compared) different += d.same() ? 0 : 1;
  return std::string(r.equal() ? "equal" : "different") + " - " + std::to_string(r.compared.size()) +
         " tensors compared: " + std::to_string(r.compared.size() - different) + " equal, " +
         std::to_string(different) + " different; " + std::to_string(r.removed.size()) + " only in A, " +
         std::to_string(r.added.size()) + " only in B, " + std::to_string(r.shape_changed.size()) +
         " changed shape";
}

void details(View& v, const DiffRow& row, ImVec2 size) {
  const char* side = row.status == DiffRow::Status::Removed ? "A" : "B";
  if (!row.tensor) {
    ImGui::Text("%s: only in %s", row.name.c_str(), side);
    return;
  }
  if (row.status == DiffRow::Status::ShapeChanged) {
    ImGui::Text("%s: the shape changed (%s), values not compared", row.name.c_str(), row.shape.c_str());
    return;
  }
  const auto& t = *row.tensor;
  ImGui::Text("%s - %s", row.name.c_str(), diff_status_name(row.status));
  ImGui::Text("elements %llu, exactly equal %llu (%s), within tolerance %llu",
              static_cast<unsigned long long>(t.numel), static_cast<unsigned long long>(t.exact),
              percent(t.exact_fraction()).c_str(), static_cast<unsigned long long>(t.close));
  ImGui::Text("non-finite mismatches %llu", static_cast<unsigned long long>(t.nonfinite));
  ImGui::Text("max |A-B| %s, ||A-B|| / ||B|| %s", number(t.max_abs, 6).c_str(),
              number(t.rel_l2(), 6).c_str());
  if (t.histogram) {
    const std::string title = display(v, "|A - B| of " + row.name);
    log_histogram("diff.hist", title.c_str(), "log10 |A - B|   (blue: A > B, orange: B > A)",
                  t.histogram->above, &t.histogram->below, size, "with B > A");
  } else {
    ImGui::TextDisabled("no histogram");
  }
}

// The width the columns after the name need to show their widest cell or header.
float numbers_width(const DiffState& d) {
  const ImGuiStyle& style = ImGui::GetStyle();
  float total = 0;
  for (int c = 1; c < kColumnCount; ++c) {
    float widest = ImGui::CalcTextSize(kColumns[c].header).x + ImGui::GetFontSize();  // the sort arrow
    for (const DiffRow& r : d.rows) {
      const std::string* cells[] = {nullptr,    nullptr,   &r.shape, &r.dtype, &r.numel,
                                    &r.max_abs, &r.rel_l2, &r.exact, &r.close};
      const char* text = c == 1 ? diff_status_name(r.status) : cells[c]->c_str();
      widest = std::max(widest, ImGui::CalcTextSize(text).x);
    }
    total += widest + 2 * style.CellPadding.x + 1;  // + the border
  }
  return total;
}

// `name` cut in the middle to fit `width` pixels ("model.decoder...q_proj.weight"): both ends of a param name
// matter. Sized to its contents, a long name pushed the last columns out of the table.
std::string elide_middle(const std::string& name, float width) {
  if (ImGui::CalcTextSize(name.c_str()).x <= width) return name;
  size_t lo = 0, hi = name.size();  // the most characters kept that still fit
  while (lo < hi) {
    const size_t keep = (lo + hi + 1) / 2;
    const std::string s = name.substr(0, keep / 2) + "..." + name.substr(name.size() - (keep - keep / 2));
    if (ImGui::CalcTextSize(s.c_str()).x <= width)
      lo = keep;
    else
      hi = keep - 1;
  }
  return name.substr(0, lo / 2) + "..." + name.substr(name.size() - (lo - lo / 2));
}

void table(View& v, ImVec2 size) {
  DiffState& d = v.diff;
  if (d.measured != d.result.get()) {
    d.numbers_width = numbers_width(d);
    d.measured = d.result.get();
  }
  const float name_width =
      std::max(8 * ImGui::GetFontSize(), size.x - d.numbers_width - 2 * ImGui::GetStyle().CellPadding.x -
                                             ImGui::GetStyle().ScrollbarSize - 2);
  v.widgets.rects["diff.table"] =
      ImVec4(ImGui::GetCursorScreenPos().x, ImGui::GetCursorScreenPos().y,
             ImGui::GetCursorScreenPos().x + size.x, ImGui::GetCursorScreenPos().y + size.y);
  // Tristate: a third click on a header returns to core's order (worst first).
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_ScrollX | ImGuiTableFlags_Resizable |
                                ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Sortable |
                                ImGuiTableFlags_SortTristate;
  if (!ImGui::BeginTable("diff.table", kColumnCount, flags, size)) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  for (const auto& c : kColumns)
    ImGui::TableSetupColumn(c.header, c.descending_first ? ImGuiTableColumnFlags_PreferSortDescending : 0);
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (int c = 0; c < kColumnCount; ++c) {
    ImGui::TableSetColumnIndex(c);
    ImGui::TableHeader(kColumns[c].header);
    v.widgets.record(std::string("diff.col.") + kColumns[c].id);
  }
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs();
      specs && (specs->SpecsDirty || !d.rows_sorted)) {
    sort_rows(d, specs);
    specs->SpecsDirty = false;
  }
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(d.rows.size()));
  while (clip.Step())
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      const DiffRow& r = d.rows[static_cast<size_t>(i)];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID(i);
      const std::string shown = elide_middle(r.name, name_width);
      if (ImGui::Selectable(shown.c_str(), d.selected == i, ImGuiSelectableFlags_SpanAllColumns))
        d.selected = i;
      if (shown.size() != r.name.size() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", r.name.c_str());
      ImGui::PopID();
      ImGui::TableNextColumn();
      const bool bad = r.status != DiffRow::Status::Equal;
      if (bad)
        ImGui::TextColored(ImVec4(0.95f, 0.6f, 0.3f, 1), "%s", diff_status_name(r.status));
      else
        ImGui::TextUnformatted(diff_status_name(r.status));
      for (const std::string* cell :
           {&r.shape, &r.dtype, &r.numel, &r.max_abs, &r.rel_l2, &r.exact, &r.close}) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(cell->c_str());
      }
    }
  ImGui::EndTable();
}

}  // namespace

const char* diff_status_name(DiffRow::Status s) {
  switch (s) {
    case DiffRow::Status::Removed:
      return "removed";
    case DiffRow::Status::Added:
      return "added";
    case DiffRow::Status::ShapeChanged:
      return "shape";
    case DiffRow::Status::DTypeChanged:
      return "dtype";
    case DiffRow::Status::Changed:
      return "changed";
    case DiffRow::Status::Equal:
      return "equal";
  }
  return "";
}

void compare_with(View& v, const std::string& other) {
  if (other.empty()) return;
  v.diff.other = other;
  v.tab = Tab::Diff;
  v.tab_requested = true;
  rerun_diff(v);
}

bool rerun_diff(View& v) {
  DiffState& d = v.diff;
  auto& s = v.session;
  if (d.other.empty() || !s.is_open()) return false;
  if (const auto* c = s.catalog(); c && c->weights_only) d.what = 0;  // weights only: no masters
  d.result.reset();
  d.rows.clear();
  d.selected = -1;
  d.error.clear();
  d.cancelled = false;
  const auto atol = tolerance(d.atol), rtol = tolerance(d.rtol);
  if (!atol || !rtol) {
    if (d.job) d.job->cancel();
    d.job.reset();
    d.error = "atol and rtol must be numbers >= 0";
    d.summary.clear();
    return false;
  }
  analysis::DiffOptions o;
  o.what = kWhats[d.what];
  o.atol = *atol;
  o.rtol = *rtol;
  o.histograms = true;
  d.summary = "Comparing (" + std::string(analysis::diff_what_name(o.what)) + ")...";
  d.job = s.diff(d.other, o, [&v](session::Outcome<analysis::DiffResult>& out) {
    if (out.superseded()) return;  // a newer request's result is on its way
    DiffState& d = v.diff;
    if (out.ok()) {
      d.result = std::make_shared<const analysis::DiffResult>(std::move(*out.value));
      d.rows = rows_of(*d.result);
      d.rows_sorted = false;
      d.summary = summary_of(*d.result);
      d.selected = d.rows.empty() ? -1 : 0;
    } else if (out.error->kind == session::ErrorKind::Cancelled) {
      d.cancelled = true;
      d.summary = "Comparison cancelled";
    } else {
      d.error = "Cannot compare: " + out.error->message;
      d.summary.clear();
    }
  });
  return true;
}

bool save_diff_rows(const View& v, const std::string& file) {
  std::ofstream out(file);
  out << "name\tstatus\tshape\tdtype\tnumel\tmax_abs\trel_l2\texact\tclose\n";
  for (const auto& r : v.diff.rows)
    out << r.name << '\t' << diff_status_name(r.status) << '\t' << r.shape << '\t' << r.dtype << '\t'
        << r.numel << '\t' << r.max_abs << '\t' << r.rel_l2 << '\t' << r.exact << '\t' << r.close << '\n';
  return static_cast<bool>(out.flush());
}

void draw_diff(View& v) {
  DiffState& d = v.diff;
  auto& s = v.session;
  if (ImGui::Button("Compare with...") && s.is_open()) {
    v.open_window.visible = true;
    v.open_window.pick = PickFor::Diff;
  }
  v.widgets.record("diff.compare");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  const bool weights_only = s.catalog() && s.catalog()->weights_only;
  if (ImGui::BeginCombo("What", std::string(analysis::diff_what_name(kWhats[d.what])).c_str())) {
    for (int i = 0; i < 4; ++i) {
      const std::string name(analysis::diff_what_name(kWhats[i]));
      if (ImGui::Selectable(name.c_str(), d.what == i,
                            weights_only && i > 0 ? ImGuiSelectableFlags_Disabled : 0) &&
          d.what != i) {
        d.what = i;
        rerun_diff(v);
      }
    }
    ImGui::EndCombo();
  }
  for (auto [label, buf] : {std::pair<const char*, char*>{"atol", d.atol}, {"rtol", d.rtol}}) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(80);
    ImGui::InputText(label, buf, sizeof d.atol);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("equal when |a - b| <= atol + rtol * |b| (torch.allclose); 0 and 0: exact");
    if (ImGui::IsItemDeactivatedAfterEdit()) rerun_diff(v);
  }
  if (d.job && !d.job->finished()) {
    ImGui::SameLine();
    ImGui::ProgressBar(static_cast<float>(d.job->fraction()), ImVec2(180, 0),
                       display(v, d.job->stage()).c_str());
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) d.job->cancel();
    v.widgets.record("diff.cancel");
  }
  if (d.other.empty()) {  // with a source open only B is missing: do not send the user to open A again
    if (s.is_open())
      ImGui::TextDisabled("A: %s\nB: none yet. Pick it with File > Compare with... (Ctrl+D).",
                          s.path().c_str());
    else
      ImGui::TextDisabled(
          "Open a checkpoint, then File > Compare with... (Ctrl+D) to compare it with another.");
    return;
  }
  if (d.result)
    ImGui::Text("A: %s\nB: %s", d.result->a.c_str(), d.result->b.c_str());
  else
    ImGui::Text("A: %s\nB: %s", s.path().c_str(), d.other.c_str());
  if (!d.error.empty()) ImGui::TextColored(ImVec4(0.95f, 0.45f, 0.4f, 1), "%s", display(v, d.error).c_str());
  if (!d.summary.empty()) ImGui::TextUnformatted(d.summary.c_str());
  if (!d.result) return;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  table(v, ImVec2(avail.x * 0.6f, avail.y));
  ImGui::SameLine();
  ImGui::BeginChild("diff.details", ImVec2(0, avail.y));
  if (d.selected >= 0 && d.selected < static_cast<int>(d.rows.size()))
    details(
        v, d.rows[static_cast<size_t>(d.selected)],
        ImVec2(ImGui::GetContentRegionAvail().x, std::min(320.0f, ImGui::GetContentRegionAvail().y - 90)));
  else
    ImGui::TextDisabled("Select a tensor.");
  ImGui::EndChild();
}

}  // namespace ckptdoc::imgui_view
