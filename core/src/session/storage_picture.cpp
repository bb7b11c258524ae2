// The storage map drawn to scale of bytes: rows = files, boxes = items.
#include "ckptdoc/session/storage_picture.h"

#include <algorithm>
#include <map>

#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/human_bytes.h"
#include "ckptdoc/session/pictures.h"

namespace ckptdoc::session {

StoragePicture storage_picture(const sources::StorageMap& map,
                               const std::vector<analysis::Finding>& findings) {
  StoragePicture pic;
  for (const auto& f : map.files) pic.scale = std::max({pic.scale, f.extent, f.size});
  std::map<std::string, size_t> key_index;
  for (size_t k = 0; k < map.keys.size(); ++k) key_index.emplace(map.keys[k].key, k);
  const double scale = pic.scale ? static_cast<double>(pic.scale) : 1.0;
  for (const auto& f : map.files) {
    StorageRow row;
    row.label = f.name;
    row.present = f.present;
    row.extent = static_cast<double>(std::max(f.extent, f.size)) / scale;
    for (const auto& finding : findings)
      for (const auto& file : finding.files)
        if (file == f.name &&
            std::find(row.findings.begin(), row.findings.end(), finding.code) == row.findings.end())
          row.findings.push_back(finding.code);
    for (size_t i = 0; i < f.items.size(); ++i) {
      const auto& item = f.items[i];
      StorageBox b;
      b.item = i;
      const auto k = key_index.find(item.key);
      b.key = k == key_index.end() ? 0 : k->second;
      b.x0 = static_cast<double>(item.offset) / scale;
      b.x1 = static_cast<double>(item.offset + item.length) / scale;
      b.rgba = param_rgba(static_cast<int>(b.key));
      row.boxes.push_back(b);
    }
    pic.rows.push_back(std::move(row));
  }
  return pic;
}

std::string box_text(const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < offsets.size() && i < sizes.size(); ++i)
    s += (i ? ", " : "") + std::to_string(offsets[i]) + ":" + std::to_string(offsets[i] + sizes[i]);
  return s + "]";
}

std::string describe_stored_item(const sources::StorageMap& map, size_t file, size_t item) {
  if (file >= map.files.size() || item >= map.files[file].items.size()) return {};
  const auto& f = map.files[file];
  const auto& it = f.items[item];
  std::string s = it.key + "\n";
  if (it.tensor)
    s += "chunk " + box_text(it.offsets, it.sizes) + "\n";
  else
    s += "bytes item (a pickled object)\n";
  s += f.name + " @ " + std::to_string(it.offset) + ", " + human_bytes(it.length);
  if (!f.present) s += "\nthe file is not on disk";
  return s;
}

}  // namespace ckptdoc::session
