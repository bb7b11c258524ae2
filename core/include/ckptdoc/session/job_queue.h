#pragma once
// Runs a session's jobs on worker threads and hands their endings to the UI thread. Jobs of one lane run one
// at a time; submitting to a busy lane supersedes the running job (asked to stop, its result dropped) and
// replaces the one still waiting there, so a control scrubbed fifty times computes at most twice (RenderDoc's
// AsyncInvoke tag). Results, intermediate updates and failures are queued and delivered by poll() on the
// thread that calls it, in the order they happened; nothing a view owns is touched from a worker.
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ckptdoc/session/job.h"

namespace ckptdoc::session {

class JobQueue {
 public:
  JobQueue() = default;
  ~JobQueue();  // shutdown()
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // Called from a worker whenever poll() has something to deliver: a Qt view posts a queued call to poll(),
  // an ImGui loop wakes its event wait. Once set_wake returns, the previous function is no longer running.
  void set_wake(std::function<void()> wake);

  // What the work of a job sees.
  class Context {
   public:
    Progress& progress() { return job_->progress(); }
    const Job& job() const { return *job_; }
    void check() const { job_->progress().check(); }  // throws Cancelled
    // Runs `on_ui_thread` in a later poll(), unless the job was superseded by then (a watch's new sample).
    void post(std::function<void()> on_ui_thread);

   private:
    friend class JobQueue;
    Context(JobQueue& queue, JobPtr job) : queue_(queue), job_(std::move(job)) {}
    JobQueue& queue_;
    JobPtr job_;
  };

  // Starts `work` on a worker (or queues it behind its lane's running job). `done` runs in poll() once the
  // job ended, whatever the ending. An empty lane gives the job a lane of its own.
  template <class T>
  JobPtr submit(JobKind kind, const std::string& lane, std::string title, std::function<T(Context&)> work,
                std::function<void(Outcome<T>&)> done = {}) {
    auto job = std::make_shared<Job>(next_id(), kind, std::move(title));
    std::weak_ptr<Job> weak = job;
    Work erased = [work = std::move(work), done, weak](Context& c) -> Deliver {
      auto value = std::make_shared<T>(work(c));
      return [value, done, weak] {
        Outcome<T> o{weak.lock(), std::move(*value), std::nullopt};
        if (done) done(o);
      };
    };
    Fail fail = [done, weak](const JobError& e) {
      Outcome<T> o{weak.lock(), std::nullopt, e};
      if (done) done(o);
    };
    enqueue(lane, job, std::move(erased), std::move(fail));
    return job;
  }

  // UI thread: delivers what is ready (updates, results, errors); returns how many callbacks ran.
  size_t poll();
  // Jobs submitted and not yet delivered (queued, running, or ended and waiting for poll), oldest first.
  std::vector<JobPtr> jobs() const;
  bool idle() const;
  // Supersedes the jobs of these lanes (running: asked to stop, result dropped; waiting: dropped).
  void supersede(const std::vector<std::string>& lanes);
  void cancel_all();  // asks every job to stop; their endings are still delivered
  // Cancels everything and waits for the workers; no callback runs afterwards. Called by the destructor.
  void shutdown();
  // Tests and shutdown paths: blocks until no job is queued or running (does not deliver).
  void wait_idle();

 private:
  using Deliver = std::function<void()>;
  using Work = std::function<Deliver(Context&)>;
  using Fail = std::function<void(const JobError&)>;
  struct Entry {
    JobPtr job;
    Work work;
    Fail fail;
  };
  struct Lane {
    bool busy = false;
    JobPtr running;
    std::unique_ptr<Entry> waiting;
  };
  struct Delivery {
    JobPtr job;
    Deliver deliver;  // the result, or a posted update when `update`
    Fail fail;        // the ending when there is no result (or the result was dropped)
    std::optional<JobError> error;
    bool update = false;
  };
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  uint64_t next_id();
  void enqueue(const std::string& lane, JobPtr job, Work work, Fail fail);
  void run_lane(std::string lane, Entry first);
  void run_one(Entry& e);
  void push(Delivery d);
  void reap_workers();

  mutable std::mutex mutex_;
  std::condition_variable idle_cv_;
  std::map<std::string, Lane> lanes_;
  std::vector<JobPtr> live_;
  std::vector<Delivery> ready_;
  std::list<Worker> workers_;
  uint64_t last_id_ = 0;
  bool shut_down_ = false;
  std::mutex wake_mutex_;
  std::function<void()> wake_;
};

}  // namespace ckptdoc::session
