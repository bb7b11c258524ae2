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
