#include "no_blend.h"

#include <GL/gl.h>

namespace ckptdoc::imgui_view {

// The OpenGL3 backend runs draw-list callbacks in order while rendering and keeps whatever state they set.
NoBlend::NoBlend(ImDrawList* dl) : dl_(dl) {
  dl_->AddCallback([](const ImDrawList*, const ImDrawCmd*) { glDisable(GL_BLEND); }, nullptr);
}

NoBlend::~NoBlend() {
  dl_->AddCallback([](const ImDrawList*, const ImDrawCmd*) { glEnable(GL_BLEND); }, nullptr);
}

}  // namespace ckptdoc::imgui_view
