#pragma once
// Progress and cooperative cancel for long work: workers bump atomic counters, front ends poll them
// (the GUI on a timer, the CLI's progress bar) and may ask to cancel. Cancelled work throws Cancelled.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace ckptdoc {

class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

class Progress {
 public:
  // Called on the worker's thread each time a stage starts, after its name and total are set; it may
  // cancel(), which the stage's next check() sees. Lets a caller act at a stage boundary (a test cancels
  // inside a stage that makes no writes) without polling or timing. Set it before the work starts.
  using StageHook = std::function<void(const std::string& stage)>;
  void on_stage(StageHook hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    hook_ = std::move(hook);
  }
  void set_stage(const std::string& name, uint64_t total) {
    StageHook hook;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stage_ = name;
      hook = hook_;
    }
    done_.store(0);
    total_.store(total);
    if (hook) hook(name);
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
  StageHook hook_;
  std::atomic<uint64_t> done_{0}, total_{0};
  std::atomic<bool> cancelled_{false};
};

}  // namespace ckptdoc
