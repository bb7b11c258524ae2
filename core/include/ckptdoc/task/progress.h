#pragma once
// Progress and cooperative cancel for long work: workers bump atomic counters, front ends poll them
// (the GUI on a timer, the CLI's progress bar) and may ask to cancel. Cancelled work throws Cancelled.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>

namespace ckptdoc {

class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

class Progress {
 public:
  void set_stage(const std::string& name, uint64_t total) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stage_ = name;
    }
    done_.store(0);
    total_.store(total);
  }
  void add(uint64_t n) { done_.fetch_add(n); }
  uint64_t done() const { return done_.load(); }
  uint64_t total() const { return total_.load(); }
  std::string stage() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stage_;
  }
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  // Throws Cancelled when cancel() was called; long loops call this between units of work.
  void check() const {
    if (cancelled_.load()) throw Cancelled();
  }

 private:
  mutable std::mutex mutex_;
  std::string stage_;
  std::atomic<uint64_t> done_{0}, total_{0};
  std::atomic<bool> cancelled_{false};
};

}  // namespace ckptdoc
