// Sniffs each `.distcp` file's first bytes: a safetensors file starts with an 8-byte little-endian header
// length and then the header's JSON ('{'); a torch.save item starts with a zip or pickle magic, never '{'
// at 8.
#include "sources/dcp/serialization_format.h"

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "ckptdoc/error.h"

namespace ckptdoc::dcp {

namespace {

bool looks_like_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[9] = {};
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return false;  // missing or short: diagnose says
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | head[i];
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return !ec && head[8] == '{' && header_len >= 2 && header_len <= size - 8;
}

}  // namespace

void refuse_safetensors_serialization(const std::string& dir, const std::vector<std::string>& files) {
  for (const auto& name : files) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    if (looks_like_safetensors(path))
      throw Error(
          ErrorKind::Unsupported, path, "",
          "a safetensors file (torch's FileSystemWriter with serialization_format=SAFETENSORS, tensors "
          "located by the header's DCP_SHARDING_INFO), not torch.save items: this DCP serialization is "
          "not read yet, so no value of this checkpoint was checked");
  }
}

}  // namespace ckptdoc::dcp
