#pragma once
// The ImGui view's entry point:
//   ckptdoc-imgui [PATH] [--script FILE] [--screenshot FILE [--tab T] [--shade S] [--param NAME] [--frames
//   N]]
//                 [--size WxH] [--bench N]
// A lean window for a remote GPU node (X forwarding, VNC) over the same core session as the Qt app: open
// (path field, file dialog, drag and drop, recent), findings with Fix, layout map, param table, plots,
// export, diff with another checkpoint.
// --script drives it from a file (tests/gui/imgui_*.script); --screenshot waits for the analysis, shows the
// worst param and saves the framebuffer; --bench N prints frame-time statistics over N frames per tab.
namespace ckptdoc::imgui_view {

int run(int argc, char** argv);

}  // namespace ckptdoc::imgui_view
