#pragma once
// safetensors files: an 8-byte little-endian header length, a JSON header, then tensor bytes. Reading
// follows the reference validation rules; writing emits {"__metadata__": {"format": "pt"}} by default.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/format/value.h"
#include "ckptdoc/io/file_io.h"

namespace ckptdoc {

struct SafetensorsEntry {
  std::string name;
  Tensor tensor;                // contiguous view on the mapped file
  uint64_t begin = 0, end = 0;  // data_offsets relative to the byte buffer
};

struct SafetensorsFile {
  std::string path;
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> entries;  // in data-offset order
  uint64_t header_size = 0;
  std::shared_ptr<const MappedFile> file;

  // Validation: header length <= 100,000,000 and within the file; valid UTF-8 JSON object; every tensor
  // has dtype/shape/data_offsets; offsets in bounds, contiguous in order, without gaps or overlaps, and
  // covering the buffer exactly; byte count == numel * element size; no duplicate keys.
  static SafetensorsFile open(const std::string& path);
  // The same over an already mapped file or a view of one (a safetensors file stored inside a bigger file,
  // as DCP's SAFETENSORS serialization does), named by its path in errors.
  static SafetensorsFile open(const std::shared_ptr<const MappedFile>& file);
  static bool looks_like_safetensors(std::span<const uint8_t> head, uint64_t file_size);
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Orders tensors the way the safetensors library's own serializer lays a file out
// (safetensors.torch.save_file, and so Hugging Face's shards and zero_to_fp32.py --safe_serialization): by
// dtype, widest first in its order (I64, F64, C64, F32, I32, BF16, F16, I16, I8, U8, BOOL), then by name in
// byte order. The header lists them in that order too, so a file written in this order is byte for byte the
// file save_file writes.
void sort_as_safetensors_saves(std::vector<NamedTensor>& tensors);

// Writes tensors in the given order (each tensor's bytes are streamed; non-contiguous tensors are made
// contiguous one at a time).
void write_safetensors_file(const std::string& path, const std::vector<NamedTensor>& tensors,
                            const std::map<std::string, std::string>& metadata = {{"format", "pt"}},
                            FileIo& io = current_io());

}  // namespace ckptdoc
