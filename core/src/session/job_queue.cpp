#include "ckptdoc/session/job_queue.h"

#include <algorithm>

namespace ckptdoc::session {

JobQueue::~JobQueue() {
  shutdown();
}

void JobQueue::set_wake(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(wake_mutex_);
  wake_ = std::move(wake);
}

uint64_t JobQueue::next_id() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++last_id_;
}

void JobQueue::Context::post(std::function<void()> on_ui_thread) {
  Delivery d;
  d.job = job_;
  d.deliver = std::move(on_ui_thread);
  d.update = true;
  queue_.push(std::move(d));
}

void JobQueue::enqueue(const std::string& lane_name, JobPtr job, Work work, Fail fail) {
  std::unique_ptr<Entry> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.push_back(job);
    const std::string name = lane_name.empty() ? "#" + std::to_string(job->id()) : lane_name;
    auto entry = std::make_unique<Entry>(Entry{job, std::move(work), std::move(fail)});
    if (shut_down_) {
      job->mark_superseded();
      dropped = std::move(entry);
    } else {
      Lane& lane = lanes_[name];
      if (lane.busy) {
        if (lane.running) lane.running->mark_superseded();
        if (lane.waiting) {
          lane.waiting->job->mark_superseded();
          dropped = std::move(lane.waiting);
        }
        lane.waiting = std::move(entry);
      } else {
        lane.busy = true;
        lane.running = job;
        reap_workers();
        auto done = std::make_shared<std::atomic<bool>>(false);
        Worker w;
        w.done = done;
        w.thread = std::thread([this, name, first = std::move(*entry), done]() mutable {
          run_lane(name, std::move(first));
          done->store(true);
        });
        workers_.push_back(std::move(w));
      }
    }
  }
  if (dropped) {  // never ran: its ending is "superseded"
    Delivery d;
    d.job = dropped->job;
    d.fail = std::move(dropped->fail);
    d.error = JobError{ErrorKind::Superseded, "superseded by a newer request", {}, {}};
    push(std::move(d));
  }
}

void JobQueue::run_lane(std::string name, Entry first) {
  Entry e = std::move(first);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lanes_[name].running = e.job;
    }
    run_one(e);
    std::lock_guard<std::mutex> lock(mutex_);
    Lane& lane = lanes_[name];
    lane.running.reset();
    if (lane.waiting && !shut_down_) {
      e = std::move(*lane.waiting);
      lane.waiting.reset();
      continue;
    }
    lanes_.erase(name);
    idle_cv_.notify_all();
    return;
  }
}

void JobQueue::run_one(Entry& e) {
  Delivery d;
  d.job = e.job;
  d.fail = e.fail;
  if (e.job->superseded()) {
    d.error = JobError{ErrorKind::Superseded, "superseded by a newer request", {}, {}};
  } else {
    e.job->mark_running();
    Context c(*this, e.job);
    try {
      d.deliver = e.work(c);
    } catch (...) {
      d.error = current_exception_error();
      if (d.error->kind == ErrorKind::Cancelled && e.job->superseded())
        d.error = JobError{ErrorKind::Superseded, "superseded by a newer request", {}, {}};
    }
  }
  e.work = nullptr;  // release what the work captured (a checkpoint, a report) before the delivery
  push(std::move(d));
}

void JobQueue::push(Delivery d) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return;
    ready_.push_back(std::move(d));
  }
  std::lock_guard<std::mutex> lock(wake_mutex_);
  if (wake_) wake_();
}

size_t JobQueue::poll() {
  std::vector<Delivery> ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready.swap(ready_);
  }
  size_t ran = 0;
  for (auto& d : ready) {
    if (d.update) {
      if (!d.job->superseded() && d.deliver) {
        d.deliver();
        ++ran;
      }
      continue;
    }
    std::optional<JobError> error = d.error;
    if (!error && d.job->superseded())  // a result that arrived after a newer request: dropped
      error = JobError{ErrorKind::Superseded, "superseded by a newer request", {}, {}};
    if (!error && d.job->cancel_requested() && !writes_files(d.job->kind()))  // the user no longer wants it
      error = JobError{ErrorKind::Cancelled, "cancelled", {}, {}};
    if (error) {
      const JobState s = error->kind == ErrorKind::Superseded  ? JobState::Superseded
                         : error->kind == ErrorKind::Cancelled ? JobState::Cancelled
                                                               : JobState::Failed;
      d.job->finish(s, error);
    } else {
      d.job->finish(JobState::Succeeded, std::nullopt);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.erase(std::remove(live_.begin(), live_.end(), d.job), live_.end());
    }
    if (error) {
      if (d.fail) d.fail(*error);
    } else if (d.deliver) {
      d.deliver();
    }
    ++ran;
  }
  return ran;
}

std::vector<JobPtr> JobQueue::jobs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}

bool JobQueue::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lanes_.empty();
}

void JobQueue::supersede(const std::vector<std::string>& names) {
  std::vector<std::unique_ptr<Entry>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& n : names) {
      auto it = lanes_.find(n);
      if (it == lanes_.end()) continue;
      if (it->second.running) it->second.running->mark_superseded();
      if (it->second.waiting) {
        it->second.waiting->job->mark_superseded();
        dropped.push_back(std::move(it->second.waiting));
      }
    }
  }
  for (auto& e : dropped) {
    Delivery d;
    d.job = e->job;
    d.fail = std::move(e->fail);
    d.error = JobError{ErrorKind::Superseded, "superseded by a newer request", {}, {}};
    push(std::move(d));
  }
}

void JobQueue::cancel_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& j : live_) j->cancel();
}

void JobQueue::shutdown() {
  set_wake({});
  std::list<Worker> workers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
    for (auto& j : live_) j->mark_superseded();
    workers.swap(workers_);
  }
  for (auto& w : workers)
    if (w.thread.joinable()) w.thread.join();
  std::lock_guard<std::mutex> lock(mutex_);
  ready_.clear();
  live_.clear();
}

void JobQueue::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [this] { return lanes_.empty(); });
}

void JobQueue::reap_workers() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done->load()) {
      if (it->thread.joinable()) it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace ckptdoc::session
