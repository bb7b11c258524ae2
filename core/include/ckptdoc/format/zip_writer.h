#pragma once
// Writes zip archives the way torch.save does: stored entries whose data starts on a 64-byte boundary
// (padding in an "FB" local extra field), data descriptors after each record, ZIP64 records when sizes or
// offsets need them. Records can be streamed: the CRC is computed while writing.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "ckptdoc/io/file_io.h"

namespace ckptdoc {

class ZipWriter {
 public:
  explicit ZipWriter(ByteSink& sink, uint64_t alignment = 64);
  // Record names must be unique, non-empty and at most 65535 bytes. Positions in the archive are the sink's
  // position(), so a sink must start at the archive's first byte. After any error the writer refuses further
  // use: the archive is incomplete.
  // Adds a record from memory.
  void add(const std::string& name, std::span<const uint8_t> data);
  // Adds a record of exactly `size` bytes that `fill` writes into the given sink (streamed, never buffered
  // whole). Throws if fill writes a different number of bytes. The given sink's position() counts the bytes
  // written into this record so far.
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
  void check_usable(const std::string& name);
  ByteSink& sink_;
  uint64_t alignment_;
  std::vector<Written> written_;
  std::unordered_set<std::string> names_;
  bool finished_ = false;
  bool failed_ = false;
};

}  // namespace ckptdoc
