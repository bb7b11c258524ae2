#pragma once
// A progress bar on stderr, drawn only when stderr is a terminal, fed by a core Progress.
#include <atomic>
#include <thread>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::cli {

class ProgressBar {
 public:
  explicit ProgressBar(const Progress& progress);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

 private:
  void draw(bool final_line);
  const Progress& progress_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool enabled_ = false;
};

}  // namespace ckptdoc::cli
