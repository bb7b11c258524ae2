#pragma once
// The CLI's subcommands. main.cpp parses arguments (CLI11 lives only there) and calls these; each returns
// the process exit code: 0 ok, 1 problems found (diagnose) or failed, 2 unusable input or usage.
#include <optional>
#include <string>

namespace ckptdoc::cli {

struct LsOptions {
  std::string path;
  bool json = false;
  int max_items = 50;  // list/dict items shown per container in the text view
};
int run_ls(const LsOptions& o);

}  // namespace ckptdoc::cli

namespace ckptdoc::cli {

struct DiagnoseOptions {
  std::string path;
  std::optional<std::string> tag;
  bool json = false;
  std::string device = "auto";
  unsigned threads = 0;
  int max_params = 30;  // rows of the per-param table in the text report
};
int run_diagnose(const DiagnoseOptions& o);

}  // namespace ckptdoc::cli

namespace ckptdoc::cli {

// `ckptdoc gui [PATH]`: the Qt desktop app (only in builds with the GUI).
struct GuiOptions {
  std::optional<std::string> path;
  std::optional<std::string> screenshot;  // save a grab once analysis is done, then exit
  std::string view = "overview";
  std::optional<std::string> param;
};
int run_gui(const GuiOptions& o, int argc, char** argv);

}  // namespace ckptdoc::cli
