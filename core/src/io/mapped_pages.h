#pragma once
// Handing pages of a memory-mapped tensor back to the kernel once they are read: they stay in the page cache,
// but a pass over a checkpoint larger than memory keeps a small resident set.
#include <algorithm>
#include <cstdint>
#include <span>

#include "ckptdoc/format/value.h"
#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc::io {

// Elements [first, first + n) of `t` (any dtype); a no-op for tensors not mapped from a file.
inline void release(const Tensor& t, int64_t first, int64_t n) {
  if (!t.storage || !t.storage->file || n <= 0) return;
  const uint64_t es = element_size(t.dtype);
  t.storage->file->dont_need(t.storage->file_offset + static_cast<uint64_t>(t.storage_offset + first) * es,
                             static_cast<uint64_t>(n) * es);
}

// Hands `visit` bytes [offset, offset + length) of a mapped file a few MiB at a time, dropping each step's
// pages from the resident set once visited (a pass over a whole checkpoint would otherwise keep all of it
// resident).
template <class Visit>
void for_each_mapped_step(const MappedFile& file, uint64_t offset, uint64_t length, Visit&& visit) {
  constexpr uint64_t kStep = 8 << 20;
  const auto all = file.slice(offset, length, "tensor bytes");
  for (uint64_t done = 0; done < length; done += kStep) {
    const uint64_t n = std::min(kStep, length - done);
    visit(all.subspan(done, n));
    file.dont_need(offset + done, n);
  }
}

}  // namespace ckptdoc::io
