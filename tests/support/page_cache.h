#pragma once
// What a cold read pulls into the page cache: a file written here, its clean pages evicted, then how much of
// it is resident after the code under test touched it (mincore). Tests skip where eviction does not empty the
// cache, or where a first touch reads no read-ahead window to save.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "ckptdoc/format/zip_writer.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/io/mapped_file.h"
#include "test_support.h"

namespace ckptdoc::test {

// Bytes of `path` in the page cache (mincore over a fresh map).
inline size_t resident_bytes(const std::string& path) {
  const auto size = static_cast<size_t>(std::filesystem::file_size(path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((size + page - 1) / page);
  size_t n = 0;
  if (map != MAP_FAILED && ::mincore(map, size, in.data()) == 0)
    for (const unsigned char c : in) n += (c & 1) ? page : 0;
  if (map != MAP_FAILED) ::munmap(map, size);
  return n;
}

// This file's clean pages. A page still under read I/O (the tail of a read-ahead window that an earlier touch
// started) is skipped by POSIX_FADV_DONTNEED, and would then count as read by the code under test: so evict
// again until none is resident, a bounded number of times (on a busy machine the I/O can take a while).
inline void evict(const std::string& path) {
  for (int attempt = 0; attempt < 300; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (resident_bytes(path) == 0) return;
    ::usleep(10000);
  }
}

// Evicts `path` and checks that a plain first touch of its mapping reads a read-ahead window there (the
// control), leaving it evicted again: "" when a cold read can be observed, else why a test should skip.
inline std::string why_read_ahead_unobservable(const std::string& path, size_t* control = nullptr) {
  evict(path);
  if (resident_bytes(path) > 0)
    return "this file system keeps the file's pages cached after POSIX_FADV_DONTNEED";
  {
    const auto plain = MappedFile::open(path);
    volatile uint8_t first = plain->bytes()[0];
    (void)first;
  }
  const size_t touched = resident_bytes(path);
  if (control) *control = touched;
  evict(path);
  // The control's read-ahead still in flight after 3 s of evicting would count as read by the code under
  // test.
  if (resident_bytes(path) > 0) return "the control read's pages could not be evicted (a busy machine)";
  // 8 MB for a file written long ago here, 1-3 MB for one just written (measured on the benchmark VM)
  if (touched < (512u << 10)) return "this device reads no read-ahead window around a first touch";
  return "";
}

// A torch.save zip whose empty-dict data.pkl is followed by a 24 MB record: bigger than any read-ahead
// window.
inline void write_torch_zip_with_big_record(const std::string& path) {
  VectorSink sink;
  ZipWriter zip(sink);
  const std::vector<uint8_t> empty_dict = {0x80, 0x02, '}', '.'};
  zip.add("big/data.pkl", empty_dict);
  zip.add("big/data/0", std::vector<uint8_t>(24u << 20, 1));
  const std::string version = "3\n";
  zip.add("big/version", std::span(reinterpret_cast<const uint8_t*>(version.data()), version.size()));
  zip.finish();
  write_text(path, std::string(sink.data.begin(), sink.data.end()));
}

}  // namespace ckptdoc::test
