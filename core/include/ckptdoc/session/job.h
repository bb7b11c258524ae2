#pragma once
// A background job of a Session: what it is, how far it got and how it ended. The worker advances it through
// core's Progress; views read it from the UI thread (every frame, or on a timer) and may cancel it. A job
// ends exactly once: succeeded with a result, failed with a typed error, cancelled, or superseded by a newer
// request of the same kind (whose result alone is wanted).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::session {

// What a job does. Convert, Diff and Watch are for the front ends that drive those pipelines through a
// session.
enum class JobKind : uint8_t {
  Open,
  Analyse,
  Plan,
  Repair,
  Verify,
  Export,
  Density,
  Convert,
  Diff,
  Watch,
  Other
};
std::string_view job_kind_name(JobKind k);  // "open", "analyse", "plan", ...
bool writes_files(JobKind k);               // Repair, Export, Convert
// What every view says of a job that ended Cancelled: "Repair cancelled; nothing was written." for a kind
// that writes files (true: such a job keeps its result once its output is published, so Cancelled means the
// partial output was removed), "Diff cancelled." for the others.
std::string cancelled_text(JobKind k);

enum class JobState : uint8_t { Queued, Running, Succeeded, Failed, Cancelled, Superseded };
std::string_view job_state_name(JobState s);  // "queued", "running", ...

// Why a job has no result.
enum class ErrorKind : uint8_t {
  Input,       // ckptdoc::Error: the input is not what it should be, or the request is impossible (says why)
  System,      // the operating system refused: file-system errors, out of memory
  Cancelled,   // the user cancelled it
  Superseded,  // a newer request of the same kind, or a newly opened source, replaced it (views ignore these)
  Internal,    // any other exception: a bug
};
std::string_view error_kind_name(ErrorKind k);

struct JobError {
  ErrorKind kind = ErrorKind::Internal;
  std::string message;      // the whole text, e.g. ckptdoc::Error::what()
  std::string file, where;  // ckptdoc::Error's parts (Input only; may be empty)
};
// The error of the exception being handled; call it inside a catch block.
JobError current_exception_error();

class Job {
 public:
  Job(uint64_t id, JobKind kind, std::string title);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  uint64_t id() const { return id_; }
  JobKind kind() const { return kind_; }
  const std::string& title() const { return title_; }
  JobState state() const { return state_.load(); }
  bool finished() const;  // Succeeded, Failed, Cancelled or Superseded
  // Progress of the current stage: its name and done/total units (bytes, params or files).
  std::string stage() const { return progress_.stage(); }
  uint64_t done() const { return progress_.done(); }
  uint64_t total() const { return progress_.total(); }
  double fraction() const;                // done / total, 0 while the total is unknown
  double seconds() const;                 // running time so far, or of the whole run once finished
  std::optional<JobError> error() const;  // set when it ended without a result

  // Cooperative: the work stops at its next check and the job ends Cancelled. A job that writes files
  // (repair, export, convert) and had already finished when asked still succeeds: files that exist are never
  // hidden. Any other job asked to cancel ends Cancelled even when its work finished first.
  void cancel() { progress_.cancel(); }
  bool cancel_requested() const { return progress_.cancelled(); }
  bool superseded() const { return superseded_.load(); }
  Progress& progress() { return progress_; }

 private:
  friend class JobQueue;
  void mark_running();
  void mark_superseded();
  void finish(JobState state, std::optional<JobError> error);

  const uint64_t id_;
  const JobKind kind_;
  const std::string title_;
  Progress progress_;
  std::atomic<JobState> state_{JobState::Queued};
  std::atomic<bool> superseded_{false};
  mutable std::mutex mutex_;
  std::optional<JobError> error_;
  std::chrono::steady_clock::time_point started_{}, ended_{};
};
using JobPtr = std::shared_ptr<Job>;

// A job's ending as its completion callback sees it (on the UI thread): the value, or else the error.
template <class T>
struct Outcome {
  JobPtr job;
  std::optional<T> value;
  std::optional<JobError> error;
  bool ok() const { return value.has_value(); }
  // True for endings a view should not report (superseded by its own newer request).
  bool superseded() const { return error && error->kind == ErrorKind::Superseded; }
};

}  // namespace ckptdoc::session
