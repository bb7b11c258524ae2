#pragma once
// Entry point of the Qt desktop app, shared by ckptdoc-gui and `ckptdoc gui`.
#include <optional>
#include <string>

namespace ckptdoc::gui {

struct AppOptions {
  std::optional<std::string> path;        // checkpoint to open at start
  std::optional<std::string> watch;       // attach to this folder of live-run snapshots at start
  std::optional<std::string> screenshot;  // save a grab of the window here once analysis is done, then quit
  std::string view = "overview";          // tab to show: overview | layout | params | diff | timeline
  std::optional<std::string> compare;     // B of the Diff tab, compared with PATH once it is analysed
  std::optional<std::string> param;       // param to select (default for screenshots: the worst one)
  std::optional<std::string> shade;       // layout map shading: param | exact | nonfinite | moments
  int bench = 0;                          // > 0: time the first paint and this many frames per scenario, quit
  int width = 1280, height = 800;
};

// Creates the QApplication (unless one exists), shows the main window and runs the event loop.
int run_app(int argc, char** argv, const AppOptions& options);
int run_app(int argc, char** argv, std::optional<std::string> path);

// Parses ckptdoc-gui's own arguments: [PATH] [--watch DIR] [--compare B] [--screenshot FILE] [--view NAME]
// [--param NAME]
// [--shade NAME] [--size WxH] [--bench N].
// Returns false (and an error text) on bad usage.
bool parse_app_arguments(int argc, char** argv, AppOptions& options, std::string& error);

}  // namespace ckptdoc::gui
