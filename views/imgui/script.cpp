#include "script.h"

#include <GL/gl.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "ckptdoc/io/held_write_io.h"
#include "ckptdoc/model/finding_codes.h"
#include "view.h"

namespace ckptdoc::imgui_view {

namespace {

const char* kCommands[] = {"wait",         "open",         "drop",          "compare",    "click",
                           "set",          "tab",          "select",        "shade",      "expect",
                           "frames",       "screenshot",   "echo",          "quit",       "save-diff",
                           "lp-source",    "save-storage", "save-findings", "hold-write", "release-write",
                           "save-summary", "fix"};

// What a text expectation (`expect export-message TEXT`) wants: the step's text after its first word.
std::string wanted_text(const std::string& text, const std::string& word) {
  const size_t at = text.find_first_not_of(" \t", word.size());
  return at == std::string::npos ? "" : text.substr(at);
}

// A job part way: running, with some but not all of its stage done.
bool part_way(const session::JobPtr& job) {
  return job && !job->finished() && job->fraction() > 0 && job->fraction() < 1;
}

char* text_field(View& v, const std::string& id, size_t* size) {
  struct Field {
    const char* id;
    char* buf;
    size_t size;
  };
  const Field fields[] = {{"path", v.path, sizeof v.path},
                          {"filter", v.filter, sizeof v.filter},
                          {"repair.output", v.repair.output, sizeof v.repair.output},
                          {"repair.target", v.repair.target, sizeof v.repair.target},
                          {"export.path", v.exporting.path, sizeof v.exporting.path},
                          {"export.shards", v.exporting.shard_size, sizeof v.exporting.shard_size},
                          {"convert.output", v.convert.output, sizeof v.convert.output},
                          {"diff.atol", v.diff.atol, sizeof v.diff.atol},
                          {"diff.rtol", v.diff.rtol, sizeof v.diff.rtol}};
  for (const auto& f : fields)
    if (id == f.id) {
      *size = f.size;
      return f.buf;
    }
  return nullptr;
}

bool has_finding(const View& v, const std::string& code) {
  for (const auto& f : v.session.findings())
    if (f.code == code) return true;
  return false;
}

}  // namespace

bool save_framebuffer(const std::string& file, int w, int h) {
  std::vector<unsigned char> pixels(static_cast<size_t>(w) * static_cast<size_t>(h) * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<unsigned char> flipped(pixels.size());
  const size_t row = static_cast<size_t>(w) * 4;
  for (int y = 0; y < h; ++y)
    std::memcpy(flipped.data() + static_cast<size_t>(y) * row,
                pixels.data() + static_cast<size_t>(h - 1 - y) * row, row);
  return stbi_write_png(file.c_str(), w, h, 4, flipped.data(), static_cast<int>(row)) != 0;
}

std::optional<Script> Script::load(const std::string& file, std::string* error) {
  std::ifstream in(file);
  if (!in) {
    *error = file + ": cannot read the script";
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), file, error);
}

std::optional<Script> Script::parse(const std::string& script, const std::string& file, std::string* error) {
  std::istringstream in(script);
  Script s;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    Step st;
    st.line = n;
    std::istringstream words(line.substr(start));
    words >> st.command;
    for (std::string w; words >> w;) st.args.push_back(w);
    const auto after = line.find(st.command, start) + st.command.size();
    const auto text_start = line.find_first_not_of(" \t", after);
    st.text = text_start == std::string::npos ? "" : line.substr(text_start);
    bool known = false;
    for (const char* c : kCommands) known = known || st.command == c;
    if (!known) {
      *error = file + ":" + std::to_string(n) + ": unknown command '" + st.command + "'";
      return std::nullopt;
    }
    s.steps_.push_back(std::move(st));
  }
  return s;
}

void Script::fail(const Step& s, const std::string& why) {
  std::fprintf(stderr, "script line %d (%s): %s\n", s.line, s.command.c_str(), why.c_str());
  finished_ = true;
  exit_code_ = 3;
  if (held_) held_->release();  // the session's workers end before the program does
}

bool Script::condition(View& v, const std::string& what) const {
  auto& s = v.session;
  if (what == "opened") return s.is_open() && !s.opening();
  if (what == "analysed") return s.report() && !s.analysing();
  if (what == "plan")
    return v.repair.plan_job && v.repair.plan_job->finished() &&
           (v.repair.plan || !v.repair.plan_error.empty());
  // A job is finished on its worker before the frame loop applies its outcome to the window: wait for both,
  // or an expectation right after reads the window's text before it is there.
  if (what == "repaired")
    return v.repair.run_job && v.repair.run_job->finished() &&
           (v.repair.of_source
                ? !v.repair.source_text.empty()
                : v.repair.result || !v.repair.run_error.empty() || !v.repair.cancelled.empty());
  if (what == "exported")
    return v.exporting.job && v.exporting.job->finished() && !v.exporting.message.empty();
  if (what == "converted")
    return v.convert.job && v.convert.job->finished() &&
           (v.convert.result || !v.convert.error.empty() || !v.convert.cancelled.empty());
  if (what == "idle") return s.jobs().empty();
  if (what == "diffed")  // finished, and its outcome applied
    return v.diff.job && v.diff.job->finished() &&
           (v.diff.result || v.diff.cancelled || !v.diff.error.empty());
  if (what == "density") return v.density.param == v.selected && v.density.job && v.density.job->finished();
  if (what == "held") return held_ && held_->held();
  return false;
}

void Script::before_frame(View& v, ImGuiIO& io, double now) {
  // No pointer but the script's: whatever the X server's pointer hovers would change what is drawn.
  io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  for (bool& down : io.MouseDown) down = false;
  while (!finished_ && pc_ < steps_.size()) {
    const Step& st = steps_[pc_];
    if (step_started_ < 0) step_started_ = now;
    auto next = [&] {
      ++pc_;
      phase_ = 0;
      step_started_ = -1;
    };
    const std::string a0 = st.args.empty() ? "" : st.args[0];
    if (st.command == "wait") {
      const double limit = st.args.size() > 1 ? std::atof(st.args[1].c_str()) : 120.0;
      if (a0 != "opened" && a0 != "analysed" && a0 != "plan" && a0 != "repaired" && a0 != "exported" &&
          a0 != "converted" && a0 != "idle" && a0 != "density" && a0 != "diffed" && a0 != "held")
        return fail(st, "unknown condition '" + a0 + "'");
      if (condition(v, a0)) {
        next();
        continue;
      }
      if (a0 == "opened" && !v.session.is_open() && !v.session.opening() && v.status_error)
        return fail(st, "the open failed: " + v.status);
      if (now - step_started_ > limit) return fail(st, "timed out after " + std::to_string(limit) + " s");
      return;  // check again next frame
    }
    if (st.command == "open" || st.command == "drop") {
      open_path(v, st.text);
      next();
      continue;
    }
    if (st.command == "compare") {  // as File > Compare with... does with the picked path
      compare_with(v, st.text);
      next();
      continue;
    }
    if (st.command ==
        "lp-source") {  // as Analysis > Compare with 16-bit weights... does with the picked file
      compare_with_lp_weights(v, st.text);
      next();
      continue;
    }
    if (st.command == "fix") {
      // As a finding's Fix button does (open_repair of the finding) for a finding whose table repair is KIND
      // (refresh-fp32, reset-optimizer, drop-optimizer, repartition, restore-model-files): not every
      // checkpoint has a finding of each.
      std::optional<analysis::RepairKind> kind;
      for (const auto k : {analysis::RepairKind::RefreshFp32, analysis::RepairKind::ResetOptimizer,
                           analysis::RepairKind::DropOptimizer, analysis::RepairKind::Repartition,
                           analysis::RepairKind::RestoreModelFiles})
        if (model::repair_name(k) == a0) kind = k;
      if (!kind) return fail(st, "unknown repair '" + a0 + "'");
      open_repair(v, *kind);
      next();
      continue;
    }
    if (st.command == "save-findings") {  // the Overview's findings as drawn: code, severity, message
      std::FILE* f = std::fopen(st.text.c_str(), "w");
      if (!f) return fail(st, "cannot write " + st.text);
      for (const auto& finding : v.session.findings())
        std::fprintf(f, "%s\t%s\t%s\n", finding.code.c_str(),
                     std::string(analysis::severity_name(finding.severity)).c_str(), finding.message.c_str());
      if (std::fclose(f) != 0) return fail(st, "cannot write " + st.text);
      next();
      continue;
    }
    if (st.command == "save-summary") {  // the Overview's summary rows as drawn: label, value
      std::FILE* f = std::fopen(st.text.c_str(), "w");
      if (!f) return fail(st, "cannot write " + st.text);
      for (const auto& [label, value] : v.summary_rows)
        std::fprintf(f, "%s\t%s\n", label.c_str(), value.c_str());
      if (std::fclose(f) != 0) return fail(st, "cannot write " + st.text);
      next();
      continue;
    }
    if (st.command == "save-storage") {
      if (!save_storage_rows(v, st.text)) return fail(st, "cannot write " + st.text);
      next();
      continue;
    }
    if (st.command == "save-diff") {
      if (!save_diff_rows(v, st.text)) return fail(st, "cannot write " + st.text);
      next();
      continue;
    }
    if (st.command == "click") {
      auto it = v.widgets.rects.find(a0);
      if (it == v.widgets.rects.end()) {
        if (now - step_started_ > 30) return fail(st, "no widget '" + a0 + "' was drawn");
        return;
      }
      const ImVec4 r = it->second;
      io.MousePos = ImVec2((r.x + r.z) * 0.5f, (r.y + r.w) * 0.5f);
      // Three frames: hover, press, release (an ImGui button fires on release over it).
      io.MouseDown[0] = phase_ == 1;
      if (++phase_ == 3) next();
      return;
    }
    if (st.command == "set") {
      size_t size = 0;
      char* buf = text_field(v, a0, &size);
      if (!buf) return fail(st, "no text field '" + a0 + "'");
      const size_t at = st.text.find_first_not_of(" \t", a0.size());
      const std::string value = at == std::string::npos ? "" : st.text.substr(at);
      std::snprintf(buf, size, "%s", value.c_str());
      next();
      continue;
    }
    if (st.command == "tab") {
      v.tab = a0 == "layout"    ? Tab::Layout
              : a0 == "params"  ? Tab::Params
              : a0 == "diff"    ? Tab::Diff
              : a0 == "storage" ? Tab::Storage
                                : Tab::Overview;
      v.tab_requested = true;
      next();
      return;  // let a frame draw it
    }
    if (st.command == "frames") {
      if (++frames_ >= std::max(1, std::atoi(a0.c_str()))) {
        frames_ = 0;
        next();
      }
      return;
    }
    if (st.command == "select") {
      select_param(v, st.text == "@worst" ? v.session.worst_param() : st.text);
      next();
      continue;
    }
    if (st.command == "shade") {
      const auto s = session::parse_shade(a0);
      if (!s) return fail(st, "unknown shade '" + a0 + "'");
      v.layout.shade = *s;
      v.layout.shade_chosen = true;
      next();
      continue;
    }
    if (st.command == "expect") {
      bool ok = false;
      std::string got;
      if (a0 == "repaired-clean") {
        const auto& r = v.repair.result;
        ok = r && r->verified_clean && r->invariant_failures.empty();
        got = r ? (r->verified_clean ? "verified clean but invariants failed" : "verification found errors")
                : "no result: " + v.repair.run_error;
      } else if (a0 == "diff-rows") {  // the Diff tab's table has N rows
        const std::string n = st.args.size() > 1 ? st.args[1] : "";
        ok = std::to_string(v.diff.rows.size()) == n;
        got = std::to_string(v.diff.rows.size()) + " diff rows" +
              (v.diff.error.empty() ? "" : ": " + v.diff.error);
      } else if (a0 ==
                 "inside") {  // widget A's rectangle lies within widget B's (e.g. a column in its table)
        const std::string a = st.args.size() > 1 ? st.args[1] : "", b = st.args.size() > 2 ? st.args[2] : "";
        const auto ia = v.widgets.rects.find(a), ib = v.widgets.rects.find(b);
        if (ia == v.widgets.rects.end() || ib == v.widgets.rects.end())
          return fail(st, "no widget '" + (ia == v.widgets.rects.end() ? a : b) + "' was drawn");
        const ImVec4 x = ia->second, y = ib->second;
        ok = x.x >= y.x - 1 && x.y >= y.y - 1 && x.z <= y.z + 1 && x.w <= y.w + 1;  // a cell's padding
        got = a;
        for (const std::string& part :
             {std::string(" spans x "), std::to_string(x.x), std::string(".."), std::to_string(x.z),
              ", " + b + " x ", std::to_string(y.x), std::string(".."), std::to_string(y.z)})
          got += part;
      } else if (a0 == "shade") {  // the layout is shaded by NAME (param, exact, nonfinite, moments)
        const std::string name = st.args.size() > 1 ? st.args[1] : "";
        ok = session::shade_name(v.layout.shade) == name;
        got = "shaded by " + std::string(session::shade_name(v.layout.shade));
      } else if (a0 == "legend") {  // the last frame drew the layout's legend, its title containing TEXT
        const size_t at = st.text.find_first_not_of(" \t", a0.size());
        const std::string want = at == std::string::npos ? "" : st.text.substr(at);
        ok = !want.empty() && v.layout.legend_drawn.find(want) != std::string::npos;
        got = v.layout.legend_drawn.empty() ? "no legend drawn" : "legend '" + v.layout.legend_drawn + "'";
      } else if (a0 == "selected") {  // a param is selected (with no name) or that one is
        const std::string name = st.args.size() > 1 ? st.args[1] : "";
        ok = name.empty() ? !v.selected.empty() : v.selected == name;
        got = v.selected.empty() ? "nothing selected" : "selected " + v.selected;
      } else if (a0 == "export-warning") {  // the export window warns, its text containing TEXT
        const size_t at = st.text.find_first_not_of(" \t", a0.size());
        const std::string want = at == std::string::npos ? "" : st.text.substr(at);
        ok = !want.empty() && v.exporting.warning.find(want) != std::string::npos;
        got = v.exporting.warning.empty() ? "no export warning (" + v.exporting.message + ")"
                                          : "warning '" + v.exporting.warning + "'";
      } else if (a0 == "plan") {  // the repair window shows a plan whose text contains TEXT
        const size_t at = st.text.find_first_not_of(" \t", a0.size());
        const std::string want = at == std::string::npos ? "" : st.text.substr(at);
        const std::string text = v.repair.plan ? v.repair.plan->text() : "";
        ok = !want.empty() && text.find(want) != std::string::npos;
        got = v.repair.plan ? "plan:\n" + text : "no plan: " + v.repair.plan_error;
      } else if (a0 == "converted-verified") {
        const auto& r = v.convert.result;
        ok = r && r->verified();
        got = r ? "verification failed" : "no result: " + v.convert.error;
      } else if (a0 == "export-progress" || a0 == "repair-progress") {  // the job's bar part way
        const auto& job = a0 == "export-progress" ? v.exporting.job : v.repair.run_job;
        ok = part_way(job);
        got = !job              ? "no job"
              : job->finished() ? "the job has ended"
                                : "at " + std::to_string(job->fraction());
      } else if (a0 == "export-message" || a0 == "repair-message" || a0 == "convert-message") {
        // The window's outcome, containing TEXT.
        const std::string want = wanted_text(st.text, a0);
        const std::string& said =
            a0 == "export-message" ? v.exporting.message
            : a0 == "repair-message"
                ? (v.repair.cancelled.empty() ? v.repair.source_text : v.repair.cancelled)
                : (v.convert.cancelled.empty() ? v.convert.error : v.convert.cancelled);
        ok = !want.empty() && said.find(want) != std::string::npos;
        got = "said '" + said + "'";
      } else if (a0 == "repair-offered" || a0 == "repair-refused") {
        // The source's repair window offers the action NAME (refresh-fp32, reset-optimizer, drop-optimizer),
        // or leaves it off with a reason containing TEXT.
        const std::string name = st.args.size() > 1 ? st.args[1] : "";
        const char* names[] = {"refresh-fp32", "reset-optimizer", "drop-optimizer"};
        int action = -1;
        for (int i = 0; i < 3; ++i)
          if (name == names[i]) action = i;
        if (action < 0) return fail(st, "unknown repair action '" + name + "'");
        const std::string& why = v.repair.refused[action];
        const std::string want = wanted_text(wanted_text(st.text, a0), name);
        ok = v.repair.visible && v.repair.of_source &&
             (a0 == "repair-offered" ? why.empty() : !want.empty() && why.find(want) != std::string::npos);
        got = !v.repair.visible || !v.repair.of_source ? "no source repair window"
              : why.empty()                            ? name + " offered"
                                                       : name + " refused: ";
        if (!why.empty() && v.repair.visible && v.repair.of_source) got += why;
      } else if (a0 == "repair-fix-refused") {
        // The source's repair window, opened by a Fix, says that fix does not apply, containing TEXT.
        const std::string want = wanted_text(st.text, a0);
        const std::string& why = v.repair.finding_refused;
        ok = v.repair.visible && v.repair.of_source && !want.empty() && why.find(want) != std::string::npos;
        got = !v.repair.visible || !v.repair.of_source ? "no source repair window" : "said '" + why + "'";
      } else if (a0 == "open-failed") {
        ok = v.status_error;
        got = "no open failure";
      } else if (a0 == "finding" || a0 == "no-finding") {
        const std::string code = st.args.size() > 1 ? st.args[1] : "";
        ok = has_finding(v, code) == (a0 == "finding");
        got = a0 == "finding" ? "no finding " + code : "finding " + code + " is there";
      } else {
        return fail(st, "unknown expectation '" + a0 + "'");
      }
      if (!ok) return fail(st, got);
      std::fprintf(stderr, "script: expect %s: ok\n", st.text.c_str());
      next();
      continue;
    }
    if (st.command == "screenshot") {
      screenshot_ = st.text;
      next();
      return;  // taken after this frame renders
    }
    if (st.command == "echo") {
      std::fprintf(stderr, "script: %s\n", st.text.c_str());
      next();
      continue;
    }
    if (st.command == "hold-write") {
      if (held_) return fail(st, "a write is already held");
      // Kept for the process's life: a running writer keeps a reference to the FileIo it started with.
      held_ = new HeldWriteIo(std::atoi(a0.c_str()));
      installed_ = new ScopedFileIo(*held_);
      next();
      continue;
    }
    if (st.command == "release-write") {
      if (!held_) return fail(st, "no hold-write before");
      held_->release();
      next();
      continue;
    }
    if (st.command == "quit") {
      finished_ = true;
      if (held_) held_->release();
      return;
    }
  }
  if (pc_ >= steps_.size()) finished_ = true;
}

void Script::after_render(int width, int height) {
  if (screenshot_.empty()) return;
  const bool ok = save_framebuffer(screenshot_, width, height);
  std::fprintf(stderr, "%s %s\n", ok ? "screenshot saved:" : "cannot save screenshot:", screenshot_.c_str());
  if (!ok) {
    finished_ = true;
    exit_code_ = 1;
  }
  screenshot_.clear();
}

}  // namespace ckptdoc::imgui_view
