// Finds the `.distcp` files written with serialization_format=SAFETENSORS: a safetensors file starts with an
// 8-byte little-endian header length and then the header's JSON ('{'); a torch.save item starts with a zip or
// pickle magic, never '{' at 8.
#include "sources/dcp/serialization_format.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"

namespace ckptdoc::dcp {

namespace {

bool safetensors_at(const std::string& path, uint64_t offset) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || offset >= size) return false;  // missing or short: diagnose says
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> head(9);
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()))) return false;
  return SafetensorsFile::looks_like_safetensors(head, size - offset);
}

}  // namespace

std::map<std::string, uint64_t> safetensors_serialized_files(const std::string& dir, const Metadata& md) {
  struct TensorItem {
    const StorageItem* item;
    const std::string* key;
  };
  std::map<std::string, std::vector<TensorItem>> tensors_of;
  for (const auto& e : md.entries)
    for (const auto& c : e.chunks) {
      if (c.item) tensors_of[c.item->file].push_back({&*c.item, &e.key});
      for (const auto& r : c.replicas) tensors_of[r.file].push_back({&r, &e.key});
    }
  std::map<std::string, uint64_t> out;
  for (const auto& [name, items] : tensors_of) {
    const uint64_t start =
        std::min_element(items.begin(), items.end(), [](const TensorItem& a, const TensorItem& b) {
          return a.item->offset < b.item->offset;
        })->item->offset;
    const std::string path = (std::filesystem::path(dir) / name).string();
    if (!safetensors_at(path, start)) continue;
    std::set<std::string> keys;
    for (const auto& t : items) {
      if (t.item->zstd)
        throw Error(
            ErrorKind::Unsupported, path, "key '" + *t.key + "'",
            "a safetensors-serialized file (serialization_format=SAFETENSORS) whose tensor items also "
            "say \"stream.zstd\": torch wrote the tensors uncompressed after an empty zstd frame each; "
            "this mix is not read, so no value of this checkpoint was checked");
      if (t.item->offset != start)
        throw Error(ErrorKind::Corrupt, path, "key '" + *t.key + "'",
                    "a tensor item at offset " + std::to_string(t.item->offset) +
                        " of a file whose safetensors "
                        "part starts at " +
                        std::to_string(start) +
                        " (serialization_format=SAFETENSORS writes "
                        "every tensor item of a file at that one offset)");
      if (!keys.insert(*t.key).second)
        throw Error(ErrorKind::Corrupt, path, "key '" + *t.key + "'",
                    "two chunks of one key in one safetensors-serialized file, which names a tensor once");
    }
    out.emplace(name, start);
  }
  return out;
}

}  // namespace ckptdoc::dcp
