#pragma once
// SHA-256 (FIPS 180-4), fed in pieces: what megatron-core's integrity.json records of each file
// (dist_checkpointing/validation.py _compute_file_hash, hashlib.sha256 over 1 MiB reads).
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace ckptdoc::io {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const uint8_t> bytes);
  // The digest as 64 lowercase hex digits (hashlib's hexdigest()); the object is spent after it.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_{};
  std::array<uint8_t, 64> pending_{};
  size_t pending_size_ = 0;
  uint64_t length_ = 0;  // bytes fed so far
};

// The SHA-256 of a whole file, read `chunk` bytes at a time (memory stays bounded whatever the file's size);
// `on_chunk(n)` runs after each read (progress, cancel). Throws Error(IoError) naming the file when it cannot
// be read.
std::string sha256_of_file(const std::string& path, size_t chunk,
                           const std::function<void(size_t)>& on_chunk);

}  // namespace ckptdoc::io
