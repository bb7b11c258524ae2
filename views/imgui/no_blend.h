#pragma once
// Draws what is added to a draw list in its scope without blending: opaque pictures (the layout raster, bars,
// the density) then cost llvmpipe one write per pixel instead of a read, a blend and a write, a good part of
// a frame on a software renderer over X forwarding.
#include <imgui.h>

namespace ckptdoc::imgui_view {

class NoBlend {
 public:
  explicit NoBlend(ImDrawList* dl);
  ~NoBlend();
  NoBlend(const NoBlend&) = delete;
  NoBlend& operator=(const NoBlend&) = delete;

 private:
  ImDrawList* dl_;
};

}  // namespace ckptdoc::imgui_view
