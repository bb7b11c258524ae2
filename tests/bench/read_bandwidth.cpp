// Baseline for the diagnose benchmark: reads files with a plain read() loop (page cache) and prints GB/s.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  std::vector<char> buf(1 << 20);
  uint64_t total = 0, checksum = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; i < argc; ++i) {
    const int fd = ::open(argv[i], O_RDONLY);
    if (fd < 0) {
      std::perror(argv[i]);
      return 2;
    }
    for (;;) {
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n <= 0) break;
      total += static_cast<uint64_t>(n);
      checksum += static_cast<unsigned char>(buf[static_cast<size_t>(n) - 1]);  // touch the data
    }
    ::close(fd);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"bytes\": %llu, \"seconds\": %.6f, \"gb_per_s\": %.3f, \"checksum\": %llu}\n",
              static_cast<unsigned long long>(total), s, static_cast<double>(total) / s / 1e9,
              static_cast<unsigned long long>(checksum));
  return 0;
}
