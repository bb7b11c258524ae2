#pragma once
// The ImGui view's entry point: `ckptdoc-imgui [PATH] [--screenshot FILE --frames N] [--size WxH]`.
// Opens the checkpoint through core, analyses it on a worker thread and draws findings, the param table and
// the partition layout. With --screenshot it renders N frames after the analysis ends, saves the framebuffer
// as PNG and exits (for headless checks under Xvfb).
namespace ckptdoc::imgui_view {

int run(int argc, char** argv);

}  // namespace ckptdoc::imgui_view
