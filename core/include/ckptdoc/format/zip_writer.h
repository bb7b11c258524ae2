#pragma once
// Writes zip archives the way torch.save does: stored entries whose data starts on a 64-byte boundary
// (padding in an "FB" local extra field), data descriptors after each record, ZIP64 records when sizes or
// offsets need them. Records can be streamed: the CRC is computed while writing.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ckptdoc/io/file_io.h"

namespace ckptdoc {

class ZipWriter {
 public:
  explicit ZipWriter(ByteSink& sink, uint64_t alignment = 64);
  // Adds a record from memory.
  void add(const std::string& name, std::span<const uint8_t> data);
  // Adds a record of exactly `size` bytes that `fill` writes into the given sink (streamed, never buffered
  // whole). Throws if fill writes a different number of bytes.
  void add_streamed(const std::string& name, uint64_t size, const std::function<void(ByteSink&)>& fill);
  // Writes the central directory and the (ZIP64) end records. No record may be added afterwards.
  void finish();

 private:
  struct Written {
    std::string name;
    uint64_t header_offset, size;
    uint32_t crc;
  };
  void write_local_header(const std::string& name, uint64_t size);
  void write_descriptor(uint32_t crc, uint64_t size, bool zip64);
  ByteSink& sink_;
  uint64_t alignment_;
  std::vector<Written> written_;
  bool finished_ = false;
};

}  // namespace ckptdoc
