#include "ckptdoc/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ckptdoc {
namespace {

// One run_on_workers call: worker ids are claimed under the mutex, so once the caller closes the call no pool
// thread can start a body that the caller is not waiting for.
struct Call {
  const std::function<void(unsigned)>* body = nullptr;
  unsigned workers = 0;
  std::mutex m;
  std::condition_variable idle;
  unsigned next = 0;    // the next worker id to hand out
  unsigned active = 0;  // bodies running on pool threads
  std::exception_ptr error;

  bool claim(unsigned& w) {
    std::lock_guard<std::mutex> lock(m);
    if (next >= workers) return false;
    w = next++;
    return true;
  }
  void run(unsigned w) {
    try {
      (*body)(w);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!error) error = std::current_exception();
    }
  }
};

class Pool {
 public:
  static Pool& instance() {
    static Pool* pool = new Pool;  // never destroyed: threads may outlive static destructors at exit
    return *pool;
  }

  void offer(const std::shared_ptr<Call>& call, unsigned helpers) {
    std::lock_guard<std::mutex> lock(m_);
    while (threads_ < helpers) {
      std::thread([this] { loop(); }).detach();
      ++threads_;
    }
    for (unsigned i = 0; i < helpers; ++i) queue_.push_back(call);
    wake_.notify_all();
  }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<Call> call;
      {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        call = std::move(queue_.front());
        queue_.pop_front();
      }
      unsigned w;
      {
        std::lock_guard<std::mutex> lock(call->m);
        if (call->next >= call->workers) continue;  // the caller (or other threads) took every id
        w = call->next++;
        ++call->active;
      }
      call->run(w);
      std::lock_guard<std::mutex> lock(call->m);
      if (--call->active == 0) call->idle.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Call>> queue_;
  unsigned threads_ = 0;
};

}  // namespace

unsigned default_workers() {
  return std::max(1u, std::thread::hardware_concurrency());
}

void run_on_workers(unsigned workers, const std::function<void(unsigned worker)>& body) {
  if (workers == 0) return;
  if (workers == 1) return body(0);
  auto call = std::make_shared<Call>();
  call->body = &body;
  call->workers = workers;
  Pool::instance().offer(call, workers - 1);
  for (unsigned w; call->claim(w);) call->run(w);
  std::unique_lock<std::mutex> lock(call->m);
  call->idle.wait(lock, [&] { return call->active == 0; });
  if (call->error) std::rethrow_exception(call->error);
}

void parallel_for(size_t n, unsigned workers, const std::function<void(size_t i, unsigned worker)>& fn) {
  if (n == 0) return;
  const unsigned w = static_cast<unsigned>(std::min<size_t>(workers ? workers : default_workers(), n));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  run_on_workers(w, [&](unsigned worker) {
    try {
      for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) fn(i, worker);
    } catch (...) {
      failed.store(true);
      throw;
    }
  });
}

}  // namespace ckptdoc
