// `ckptdoc gui [PATH] [--watch DIR] ...`: runs the desktop app, ckptdoc-gui, with the same arguments. The CLI
// execs it instead of linking Qt, so that ckptdoc starts on machines without Qt (cluster nodes).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ckptdoc/io/executable_dir.h"
#include "commands.h"

namespace ckptdoc::cli {

namespace {
constexpr const char* kGui = "ckptdoc-gui";

// ckptdoc-gui's own command line (app/gui_main.cpp parses it with the same option names and meanings).
std::vector<std::string> gui_arguments(const GuiOptions& o) {
  std::vector<std::string> args{kGui};
  auto add = [&](const char* flag, const std::optional<std::string>& v) {
    if (v) args.insert(args.end(), {flag, *v});
  };
  add("--watch", o.watch);
  add("--screenshot", o.screenshot);
  args.insert(args.end(), {"--view", o.view});
  add("--compare", o.compare);
  add("--param", o.param);
  add("--shade", o.shade);
  add("--size", o.size);
  // ckptdoc-gui passes unknown dash words to Qt: a path that starts with '-' goes as ./-name.
  if (o.path) args.push_back(!o.path->empty() && (*o.path)[0] == '-' ? "./" + *o.path : *o.path);
  return args;
}

// Replaces this process with `program`; returns only when that failed.
void exec(const std::string& program, const std::vector<std::string>& args, bool search_path) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  if (search_path)
    execvp(program.c_str(), argv.data());
  else
    execv(program.c_str(), argv.data());
}
}  // namespace

int run_gui(const GuiOptions& o) {
  const auto args = gui_arguments(o);
  // Next to this executable first (a build tree or an install), then PATH.
  const std::string dir = io::executable_dir();
  const std::string sibling = dir.empty() ? "" : dir + "/" + kGui;
  if (!sibling.empty() && access(sibling.c_str(), X_OK) == 0) {
    exec(sibling, args, false);
    std::fprintf(stderr, "ckptdoc gui: could not run %s: %s\n", sibling.c_str(), std::strerror(errno));
    return 2;
  }
  exec(kGui, args, true);
  const std::string why = errno == ENOENT ? "" : std::string(" (") + std::strerror(errno) + ")";
  std::fprintf(stderr, "ckptdoc gui: the desktop app %s was not found: looked for %s, then on PATH%s\n", kGui,
               sibling.empty() ? "it beside ckptdoc (whose folder is unknown)" : sibling.c_str(),
               why.c_str());
  std::fprintf(stderr, "  (it is built with Qt 6: target ckptdoc-gui)\n");
  return 2;
}

}  // namespace ckptdoc::cli
