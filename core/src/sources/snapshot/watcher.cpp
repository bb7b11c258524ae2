// SnapshotWatcher: inotify wakes a rescan of the folder; the manifest (renamed into place last by the hook)
// is the only thing that makes a snapshot "committed", so a half-written one is reported as pending, never
// read.
#include "ckptdoc/sources/snapshot/watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"

namespace fs = std::filesystem;

namespace ckptdoc::snapshot {
namespace {

constexpr uint32_t kFolderEvents = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CLOSE_WRITE |
                                   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
constexpr int kPollFallbackMs = 500;

bool has_snapshot_files(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind("rank_", 0) == 0 || n.rfind(".rank_", 0) == 0 || n.rfind(".manifest", 0) == 0) return true;
  }
  return false;
}

}  // namespace

SnapshotWatcher::SnapshotWatcher(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorKind::NotFound, dir, "",
                "not a folder (watch expects the folder that snapshots are written into)");
  dir_ = fs::absolute(dir, ec).lexically_normal().string();
  if (ec) throw Error(ErrorKind::Io, dir, "", ec.message());
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (inotify_fd_ >= 0) watch_folder(dir_);
}

SnapshotWatcher::~SnapshotWatcher() {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void SnapshotWatcher::watch_folder(const std::string& path) {
  if (inotify_fd_ < 0) return;
  const int wd = ::inotify_add_watch(inotify_fd_, path.c_str(), kFolderEvents);
  if (wd >= 0) watches_[wd] = path;  // adding a watched folder again returns the same descriptor
}

void SnapshotWatcher::stop() {
  stopped_.store(true);
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
}

std::vector<WatchEvent> SnapshotWatcher::rescan() {
  struct Seen {
    std::string id;  // "" while pending
    int64_t step = 0;
    double created = 0;
    std::string tag;
  };
  std::map<std::string, Seen> now;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_directory(ec2)) continue;
    const std::string path = it->path().string();
    watch_folder(path);  // before looking inside: a manifest renamed in from now on wakes us
    Seen s;
    s.tag = it->path().filename().string();
    if (is_snapshot_dir(path)) {
      try {
        const Manifest m = Manifest::read(path);
        s.id = m.id.empty() ? std::to_string(m.created_unix) : m.id;
        s.step = m.live.global_steps;
        s.created = m.created_unix;
        s.tag = m.tag;
      } catch (const Error&) {
        s.id = "unreadable";  // committed but damaged: reported, and whoever opens it gets the error
      }
      now[path] = s;
    } else if (has_snapshot_files(it->path())) {
      now[path] = s;  // pending
    }
  }
  std::vector<WatchEvent> removed, pending, committed;
  std::vector<std::pair<std::pair<int64_t, double>, WatchEvent>> order;
  for (const auto& [path, s] : now) {
    auto old = known_.find(path);
    if (s.id.empty()) {
      if (old != known_.end() && !old->second.empty())
        removed.push_back({WatchEvent::Kind::Removed, path, fs::path(path).filename().string(), old->second});
      if (old == known_.end() || !old->second.empty())
        pending.push_back({WatchEvent::Kind::Pending, path, s.tag, ""});
    } else if (old == known_.end() || old->second != s.id) {
      order.push_back({{s.step, s.created}, {WatchEvent::Kind::Committed, path, s.tag, s.id}});
    }
  }
  for (const auto& [path, id] : known_)
    if (!now.count(path) && !id.empty())
      removed.push_back({WatchEvent::Kind::Removed, path, fs::path(path).filename().string(), id});
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  known_.clear();
  for (const auto& [path, s] : now) known_[path] = s.id;
  std::vector<WatchEvent> out = std::move(removed);
  for (auto& e : pending) out.push_back(std::move(e));
  for (auto& [_, e] : order) out.push_back(std::move(e));
  return out;
}

std::vector<WatchEvent> SnapshotWatcher::wait(int timeout_ms) {
  if (stopped_.load()) return {};
  if (first_) {
    first_ = false;
    auto events = rescan();
    if (!events.empty()) return events;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  for (;;) {
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    if (inotify_fd_ < 0) wait_ms = wait_ms < 0 ? kPollFallbackMs : std::min(wait_ms, kPollFallbackMs);
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
    const int rc = ::poll(fds, inotify_fd_ >= 0 ? 2 : 1, wait_ms);
    if (stopped_.load()) return {};
    if (rc < 0 && errno != EINTR)
      throw Error(ErrorKind::Io, dir_, "", std::string("poll: ") + std::strerror(errno));
    if (inotify_fd_ >= 0 && rc > 0 && (fds[1].revents & POLLIN)) {
      alignas(inotify_event) char buf[16384];
      for (;;) {  // drain; forget folders the kernel stopped watching
        const ssize_t n = ::read(inotify_fd_, buf, sizeof buf);
        if (n <= 0) break;
        for (ssize_t at = 0; at < n;) {
          const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
          if (e->mask & IN_IGNORED) watches_.erase(e->wd);
          at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
        }
      }
    }
    if (rc != 0 || inotify_fd_ < 0) {
      auto events = rescan();
      if (!events.empty()) return events;
    }
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline) return {};
  }
}

}  // namespace ckptdoc::snapshot
