// ckptdoc-gui: the desktop app. `ckptdoc-gui [PATH] [--screenshot FILE] [--view NAME]`.
#include <cstdio>
#include <string>

#include "app.h"

int main(int argc, char** argv) {
  ckptdoc::gui::AppOptions options;
  std::string error;
  if (!ckptdoc::gui::parse_app_arguments(argc, argv, options, error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return error.rfind("usage:", 0) == 0 ? 0 : 2;
  }
  return ckptdoc::gui::run_app(argc, argv, options);
}
