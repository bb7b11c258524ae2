// Storage: the bytes behind tensors (mapped, owned or produced on demand).
#include "ckptdoc/format/value.h"
#include "format/value_fail.h"

namespace ckptdoc {

using value_detail::fail;
using value_detail::mul_overflow;

std::span<const uint8_t> Storage::bytes() const {
  uint64_t n = 0;
  if (mul_overflow(numel, element_size(dtype), &n)) fail("storage '" + key + "': size overflows");
  if (file) return file->slice(file_offset, n, "storage bytes");
  if (owned) {
    if (owned->size() < n)
      fail("storage '" + key +
           "': " + expected_found(std::to_string(n) + " bytes", std::to_string(owned->size()) + " bytes"));
    return {owned->data(), static_cast<size_t>(n)};
  }
  fail("storage '" + key + "': bytes are produced on demand, not held in memory");
}

void Storage::write_to(ByteSink& sink) const {
  if (file) {  // file sinks copy in the kernel; others read the mapping a step at a time and drop what they
               // read
    sink.write_file_range(*file, file_offset, bytes().size());
    return;
  }
  if (owned) {
    sink.write(bytes());
    return;
  }
  if (!producer) fail("storage '" + key + "' has no bytes");
  const uint64_t start = sink.position();
  producer(sink);
  const uint64_t wrote = sink.position() - start;
  if (wrote != nbytes())
    fail("storage '" + key + "': producer " +
         expected_found(std::to_string(nbytes()) + " bytes", std::to_string(wrote) + " bytes"));
}

// Readers see these bytes as float or uint16_t arrays, which must start on their element size. torch.save
// pads its records to 64 bytes from the start of its own stream, but DCP packs torch.save streams end to end
// in a .distcp file, and a zip repacked by another tool or a safetensors header without padding need not pad
// at all: such a storage is copied, at the cost of its size in memory while it lives (a DCP chunk while it is
// read). The copied pages are handed back; a file cut short while copying is an error here, since the copy no
// longer maps it. (The legacy torch format does not come here: torch_file_reader.cpp.)
void Storage::map_from(std::shared_ptr<const MappedFile> f, uint64_t offset) {
  const auto span = f->slice(offset, nbytes(), "storage bytes");
  if (reinterpret_cast<uintptr_t>(span.data()) % element_size(dtype) == 0) {
    file = std::move(f);
    file_offset = offset;
    owned.reset();
    return;
  }
  owned = std::make_shared<const std::vector<uint8_t>>(span.begin(), span.end());
  f->check_unchanged();
  f->dont_need(offset, span.size());
  file.reset();
  file_offset = 0;
}

std::shared_ptr<Storage> Storage::from_bytes(DType dtype, std::vector<uint8_t> bytes, std::string key) {
  const size_t es = element_size(dtype);
  if (bytes.size() % es != 0)
    fail("storage of " + std::string(dtype_name(dtype)) + ": " + std::to_string(bytes.size()) +
         " bytes is not a multiple of the element size " + std::to_string(es));
  auto s = std::make_shared<Storage>();
  s->key = std::move(key);
  s->dtype = dtype;
  s->numel = bytes.size() / es;
  s->owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return s;
}

}  // namespace ckptdoc
