#include "texture.h"

#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>

#include <cstdint>

namespace ckptdoc::imgui_view {

Texture::~Texture() {
  if (name_) glDeleteTextures(1, &name_);
}

void Texture::upload(int width, int height, const uint8_t* rgba) {
  if (!name_) glGenTextures(1, &name_);
  glBindTexture(GL_TEXTURE_2D, name_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  if (width == width_ && height == height_)
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
  else
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
  width_ = width;
  height_ = height;
}

ImTextureID Texture::id() const {
  return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(name_));
}

}  // namespace ckptdoc::imgui_view
