#include "progress_bar.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace ckptdoc::cli {

ProgressBar::ProgressBar(const Progress& progress)
    : progress_(progress), enabled_(::isatty(STDERR_FILENO) != 0) {
  if (!enabled_) return;
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      draw(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

ProgressBar::~ProgressBar() {
  if (!enabled_) return;
  stop_.store(true);
  thread_.join();
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

void ProgressBar::draw(bool) {
  const uint64_t total = progress_.total(), done = progress_.done();
  const double f = total ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
  const int width = 30, filled = static_cast<int>(f * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r\033[K%s [%s] %5.1f%% (%.1f / %.1f MiB)", progress_.stage().c_str(), bar.c_str(),
               f * 100.0, static_cast<double>(done) / 1048576.0, static_cast<double>(total) / 1048576.0);
  std::fflush(stderr);
}

}  // namespace ckptdoc::cli
