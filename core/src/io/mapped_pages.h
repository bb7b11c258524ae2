#pragma once
// Handing pages of a memory-mapped file back to the kernel once they are read: they stay in the page cache,
// but a pass over a checkpoint larger than memory keeps a small resident set (a tensor's:
// format/tensor_pages.h).
#include <algorithm>
#include <cstdint>
#include <span>

#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc::io {

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
