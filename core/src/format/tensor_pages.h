#pragma once
// Handing the pages of a memory-mapped tensor back to the kernel once they are read: they stay in the page
// cache, but a pass over a checkpoint larger than memory keeps a small resident set. In format/, beside the
// Tensor it reads, so that io/ (mapped_pages.h: the same for raw bytes) includes nothing of format/.
#include <cstdint>

#include "ckptdoc/format/value.h"
#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc {

// Elements [first, first + n) of `t` (any dtype); a no-op for tensors not mapped from a file.
inline void release_pages(const Tensor& t, int64_t first, int64_t n) {
  if (!t.storage || !t.storage->file || n <= 0) return;
  const uint64_t es = element_size(t.dtype);
  t.storage->file->dont_need(t.storage->file_offset + static_cast<uint64_t>(t.storage_offset + first) * es,
                             static_cast<uint64_t>(n) * es);
}

}  // namespace ckptdoc
