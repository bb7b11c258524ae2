#pragma once
// Reading a few KB spread over a mapped file (a zip's directory, local headers and data.pkl, or just its
// first bytes) cold: the first touch of a mapped page reads the device's whole read-ahead window around it
// (8 MB on the benchmark VM; a cold open of a 64-rank checkpoint read 1.9 GB of its 12 GB). While one of
// these lives, the map has no read-around, so a touch reads what it uses; the advice goes back to normal
// when it goes, before any tensor is read.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc {

class NoReadAround {
 public:
  explicit NoReadAround(const MappedFile& f) {
    if (f.device() == 0 || f.size() == 0) return;  // from_memory: nothing to read ahead
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    // madvise wants a page-aligned start: step back from the map's first byte (pointer arithmetic, no int
    // cast)
    auto* begin = const_cast<uint8_t*>(f.bytes().data());
    const auto into_page = static_cast<size_t>(reinterpret_cast<uintptr_t>(begin) % page);
    start_ = begin - into_page;
    length_ = (into_page + static_cast<size_t>(f.size()) + page - 1) / page * page;
    ::madvise(start_, length_, MADV_RANDOM);
  }
  ~NoReadAround() {
    if (length_) ::madvise(start_, length_, MADV_NORMAL);
  }
  NoReadAround(const NoReadAround&) = delete;
  NoReadAround& operator=(const NoReadAround&) = delete;

 private:
  uint8_t* start_ = nullptr;
  size_t length_ = 0;
};

}  // namespace ckptdoc
