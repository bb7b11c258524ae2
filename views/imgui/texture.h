#pragma once
// An OpenGL texture holding core's RGBA pixels (session::Raster), drawn with ImGui::Image / AddImage.
// Uploaded only when its content changes; nearest filtering keeps one fragment one crisp pixel.
#include <imgui.h>

#include <cstdint>

namespace ckptdoc::imgui_view {

class Texture {
 public:
  Texture() = default;
  ~Texture();
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;
  void upload(int width, int height, const uint8_t* rgba);
  ImTextureID id() const;
  int width() const { return width_; }
  int height() const { return height_; }
  bool empty() const { return width_ == 0 || height_ == 0; }
  void clear() { width_ = height_ = 0; }  // stale: upload again before drawing (the GL name is kept)

 private:
  unsigned name_ = 0;
  int width_ = 0, height_ = 0;
};

}  // namespace ckptdoc::imgui_view
