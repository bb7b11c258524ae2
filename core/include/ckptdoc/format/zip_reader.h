#pragma once
// Reads the central directory of a zip archive over a memory-mapped file (stored entries only, ZIP64
// aware), and hands out zero-copy views of each record. Every offset and size is checked against the file.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc {

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;      // where the record's bytes start in the file
  uint64_t size = 0;             // uncompressed == compressed (stored)
  uint64_t compressed_size = 0;  // bytes in the file; equals size for stored records
  uint32_t crc32 = 0;
  uint16_t method = 0;  // 0 = stored; anything else is refused when read
  uint64_t header_offset = 0;
};

class ZipReader {
 public:
  // Parses the end-of-central-directory (ZIP64 too) and the central directory. Local headers are read per
  // entry to find the data offset (their sizes are ignored: torch writes zeros there). Throws ckptdoc::Error.
  explicit ZipReader(std::shared_ptr<const MappedFile> file);

  static bool looks_like_zip(std::span<const uint8_t> head);  // "PK\x03\x04"

  const std::vector<ZipEntry>& entries() const { return entries_; }
  // Every central-directory entry is kept, duplicates included (a scanner may want to see them); find()
  // returns the first entry of a name, as torch does.
  const ZipEntry* find(std::string_view name) const;
  // Bytes of a stored entry; throws for compressed entries or out-of-range data.
  std::span<const uint8_t> data(const ZipEntry& entry) const;
  // Recomputes the CRC-32 of an entry and compares with the directory.
  bool verify_crc(const ZipEntry& entry) const;
  const std::shared_ptr<const MappedFile>& file() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> index_;  // name -> its entry (names are unique)
};

uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> bytes);  // start with 0
uint32_t crc32(std::span<const uint8_t> bytes);

}  // namespace ckptdoc
