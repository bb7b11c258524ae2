#pragma once
// Scripted input for tests and screenshots: a text file of commands that drive the view the way a user does.
// Clicks go through ImGui's input (the pointer moves over the widget recorded under that name, presses and
// releases), waits poll the session's state, and the script ends the program with its own exit code.
//
//   wait opened|analysed|plan|repaired|exported|converted|idle|density|diffed [SECONDS]   (default 120 s; a
//   timeout
//                                     fails the script)
//   open PATH | drop PATH             start opening PATH (drop: as if dropped onto the window)
//   compare PATH                      compare the open checkpoint with PATH (as File > Compare with... does)
//   lp-source PATH                    ZeRO-3: re-analyse against 16-bit weights at PATH (as Analysis >
//   Compare
//                                     with 16-bit weights... does)
//   click ID                          e.g. "fix:fp32-master-mismatch", "repair.run", "diff.cancel",
//                                     "menu.checkpoint" then "menu.repair", "repair.reset-optimizer"
//   fix REPAIR                        what a finding's Fix does for a finding whose table repair is REPAIR
//                                     (refresh-fp32, reset-optimizer, drop-optimizer, repartition, ...)
//   set ID TEXT                       fill a text field: path, filter, repair.output, repair.target,
//                                     export.path, convert.output, diff.atol, diff.rtol
//   tab overview|layout|params|diff|storage   select PARAM   shade param|exact|nonfinite|moments
//   expect repaired-clean | open-failed | finding CODE | no-finding CODE | diff-rows N | plan TEXT |
//                                     converted-verified | repair-offered ACTION | repair-refused ACTION TEXT
//                                     (the source's repair window offers refresh-fp32, reset-optimizer or
//                                     drop-optimizer, or leaves it off saying TEXT) |
//                                     repair-fix-refused TEXT (it says the Fix that opened it does not
//                                     apply here, saying TEXT)
//   frames N                          render N frames (pictures settle)
//   save-diff FILE                    write the Diff tab's rows as drawn (tab-separated)
//   save-findings FILE                write the findings as the Overview draws them (code, severity, message)
//   save-summary FILE                 write the Overview's summary rows as drawn (label, value)
//   save-storage FILE                 write the Storage tab's boxes as drawn (file, present, key, offset,
//   length) screenshot FILE   echo TEXT   quit
// `select @worst` selects the param with the worst divergence; `wait density` waits for its density plot.
//   hold-write N   release-write   (test scaffolding) hold the N-th file write from now on until released;
//                                  `wait held` waits for it, `expect export-progress|repair-progress` then
//                                  sees the job's bar part way, `expect export-message|repair-message|
//                                  convert-message TEXT` its outcome.
#include <imgui.h>

#include <optional>
#include <string>
#include <vector>

namespace ckptdoc {
class HeldWriteIo;
class ScopedFileIo;
}  // namespace ckptdoc

namespace ckptdoc::imgui_view {

struct View;

class Script {
 public:
  // Parses `file`; nullopt (and *error) when it cannot be read or a command is unknown.
  static std::optional<Script> load(const std::string& file, std::string* error);
  static std::optional<Script> parse(const std::string& text, const std::string& name, std::string* error);
  // Before ImGui::NewFrame(): runs commands that are ready and sets the pointer for a click in progress.
  void before_frame(View& v, ImGuiIO& io, double now);
  // After rendering: takes a pending screenshot of the framebuffer (w x h).
  void after_render(int width, int height);
  bool finished() const { return finished_; }
  int exit_code() const { return exit_code_; }

 private:
  struct Step {
    std::string command;
    std::vector<std::string> args;
    std::string text;  // everything after the command (paths may hold spaces)
    int line = 0;
  };
  void fail(const Step& s, const std::string& why);
  bool condition(View& v, const std::string& what) const;

  std::vector<Step> steps_;
  size_t pc_ = 0;
  HeldWriteIo* held_ = nullptr;  // hold-write's, never deleted (see there)
  ScopedFileIo* installed_ = nullptr;
  int phase_ = 0;
  int frames_ = 0;
  double step_started_ = -1;
  std::string screenshot_;
  bool finished_ = false;
  int exit_code_ = 0;
};

bool save_framebuffer(const std::string& file, int width, int height);

}  // namespace ckptdoc::imgui_view
