#include "ckptdoc/session/job.h"

#include <filesystem>
#include <new>
#include <system_error>

#include "ckptdoc/error.h"

namespace ckptdoc::session {

std::string_view job_kind_name(JobKind k) {
  switch (k) {
    case JobKind::Open:
      return "open";
    case JobKind::Analyse:
      return "analyse";
    case JobKind::Plan:
      return "plan";
    case JobKind::Repair:
      return "repair";
    case JobKind::Verify:
      return "verify";
    case JobKind::Export:
      return "export";
    case JobKind::Density:
      return "density";
    case JobKind::Convert:
      return "convert";
    case JobKind::Diff:
      return "diff";
    case JobKind::Watch:
      return "watch";
    case JobKind::Other:
      break;
  }
  return "other";
}

bool writes_files(JobKind k) {
  return k == JobKind::Repair || k == JobKind::Export || k == JobKind::Convert;
}

std::string cancelled_text(JobKind k) {
  std::string what(job_kind_name(k));
  what[0] = static_cast<char>(what[0] - 'a' + 'A');
  return what + (writes_files(k) ? " cancelled; nothing was written." : " cancelled.");
}

std::string_view job_state_name(JobState s) {
  switch (s) {
    case JobState::Queued:
      return "queued";
    case JobState::Running:
      return "running";
    case JobState::Succeeded:
      return "succeeded";
    case JobState::Failed:
      return "failed";
    case JobState::Cancelled:
      return "cancelled";
    case JobState::Superseded:
      return "superseded";
  }
  return "?";
}

std::string_view error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::Input:
      return "input";
    case ErrorKind::System:
      return "system";
    case ErrorKind::Cancelled:
      return "cancelled";
    case ErrorKind::Superseded:
      return "superseded";
    case ErrorKind::Internal:
      break;
  }
  return "internal";
}

JobError current_exception_error() {
  try {
    throw;
  } catch (const Cancelled&) {
    return {ErrorKind::Cancelled, "cancelled", {}, {}};
  } catch (const Error& e) {
    return {ErrorKind::Input, e.what(), e.file(), e.where()};
  } catch (const std::filesystem::filesystem_error& e) {
    return {ErrorKind::System, e.what(), e.path1().string(), {}};
  } catch (const std::system_error& e) {
    return {ErrorKind::System, e.what(), {}, {}};
  } catch (const std::bad_alloc&) {
    return {ErrorKind::System, "out of memory", {}, {}};
  } catch (const std::exception& e) {
    return {ErrorKind::Internal, e.what(), {}, {}};
  } catch (...) {
    return {ErrorKind::Internal, "unknown error", {}, {}};
  }
}

Job::Job(uint64_t id, JobKind kind, std::string title) : id_(id), kind_(kind), title_(std::move(title)) {}

bool Job::finished() const {
  const JobState s = state_.load();
  return s != JobState::Queued && s != JobState::Running;
}

double Job::fraction() const {
  const uint64_t t = total();
  return t ? static_cast<double>(done()) / static_cast<double>(t) : 0.0;
}

double Job::seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_ == std::chrono::steady_clock::time_point{}) return 0;
  const auto end =
      ended_ == std::chrono::steady_clock::time_point{} ? std::chrono::steady_clock::now() : ended_;
  return std::chrono::duration<double>(end - started_).count();
}

std::optional<JobError> Job::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void Job::mark_running() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    started_ = std::chrono::steady_clock::now();
  }
  state_.store(JobState::Running);
}

void Job::mark_superseded() {
  superseded_.store(true);
  progress_.cancel();
}

void Job::finish(JobState state, std::optional<JobError> error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_ == std::chrono::steady_clock::time_point{}) ended_ = std::chrono::steady_clock::now();
    if (started_ == std::chrono::steady_clock::time_point{}) started_ = ended_;
    error_ = std::move(error);
  }
  state_.store(state);
}

}  // namespace ckptdoc::session
