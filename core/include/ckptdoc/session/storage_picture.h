#pragma once
// The storage map's picture, for both views: one row per storage file, each item (a tensor chunk or a bytes
// item) a box placed at its byte offset and as wide as its bytes, every row on one scale (the longest file),
// coloured by its key (the same key has the same colour in every file). A file that is not on disk, or one a
// finding names, is marked; views only add labels, outlines and tooltips.
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/storage_map.h"

namespace ckptdoc::session {

struct StorageBox {
  size_t item = 0;        // index into the file's items
  size_t key = 0;         // index into StorageMap::keys
  double x0 = 0, x1 = 0;  // fractions of the row width: offset / scale, (offset + length) / scale
  uint32_t rgba = 0;      // 0xRRGGBBAA
};

struct StorageRow {
  std::string label;  // the file's name
  bool present = true;
  double extent = 0;  // fraction of the width the file's items reach (the file's own length when larger)
  std::vector<std::string> findings;  // codes of the findings naming this file
  std::vector<StorageBox> boxes;
};

struct StoragePicture {
  uint64_t scale = 0;  // bytes across the full width
  std::vector<StorageRow> rows;
};

StoragePicture storage_picture(const sources::StorageMap& map,
                               const std::vector<analysis::Finding>& findings);

// Tooltip text (plain lines) for one item of one file.
std::string describe_stored_item(const sources::StorageMap& map, size_t file, size_t item);

// "[0:32, 0:32]" for a chunk's box (its shape is format/shape_text.h's "[32, 32]").
std::string box_text(const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes);

}  // namespace ckptdoc::session
