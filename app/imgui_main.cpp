// ckptdoc-imgui: the alternative ImGui view. `ckptdoc-imgui PATH [--screenshot FILE --frames N]`.
#include "imgui_app.h"

int main(int argc, char** argv) {
  return ckptdoc::imgui_view::run(argc, argv);
}
