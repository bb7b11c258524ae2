// `ckptdoc gui [PATH] [--watch DIR]`: starts the Qt desktop app from the CLI (builds without Qt say so and
// exit 2).
#include <cstdio>

#include "commands.h"
#ifdef CKPTDOC_HAVE_GUI
#include "app.h"
#endif

namespace ckptdoc::cli {

int run_gui(const GuiOptions& o, int argc, char** argv) {
#ifdef CKPTDOC_HAVE_GUI
  gui::AppOptions app;
  app.path = o.path;
  app.watch = o.watch;
  app.screenshot = o.screenshot;
  app.view = o.view;
  app.param = o.param;
  app.shade = o.shade;
  if (o.size && std::sscanf(o.size->c_str(), "%dx%d", &app.width, &app.height) != 2) {
    std::fprintf(stderr, "ckptdoc gui: --size wants WxH, e.g. 1280x800\n");
    return 2;
  }
  // QApplication sees only the program name: the subcommand's arguments were parsed already.
  int qt_argc = argc > 0 ? 1 : 0;
  return gui::run_app(qt_argc, argv, app);
#else
  (void)o;
  (void)argc;
  (void)argv;
  std::fprintf(stderr, "ckptdoc: this build has no desktop app (Qt 6 was not found at build time)\n");
  return 2;
#endif
}

}  // namespace ckptdoc::cli
