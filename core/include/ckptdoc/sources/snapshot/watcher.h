#pragma once
// Watches a folder of snapshots (the out_dir of ckptdoc_hook.every/dump) without polling: inotify on the
// folder and on each snapshot folder wakes a rescan, which reports snapshots as they are committed (their
// manifest appears), folders being written (no manifest yet) and snapshots that went away. Qt-free; the CLI's
// watch and the app's attach mode both use it.
#include <atomic>
#include <map>
#include <string>
#include <vector>

namespace ckptdoc::snapshot {

struct WatchEvent {
  enum class Kind { Pending, Committed, Removed };
  Kind kind = Kind::Committed;
  std::string dir;  // the snapshot folder
  std::string tag;  // its folder name (Committed: the manifest's tag)
  std::string id;   // Committed: the manifest's id (a re-dumped tag gets a new one)
};

class SnapshotWatcher {
 public:
  // Throws ckptdoc::Error when `dir` is not a folder.
  explicit SnapshotWatcher(const std::string& dir);
  ~SnapshotWatcher();
  SnapshotWatcher(const SnapshotWatcher&) = delete;
  SnapshotWatcher& operator=(const SnapshotWatcher&) = delete;

  // Returns the changes since the last call (the first call: what is there already, oldest first), waiting up
  // to timeout_ms (-1: no limit) for one when there is none. Empty when the time ran out or stop() was
  // called.
  std::vector<WatchEvent> wait(int timeout_ms);
  // Wakes a wait() in progress (any thread); later waits return at once.
  void stop();
  bool stopped() const { return stopped_.load(); }
  // True when the kernel's file-system events are used (Linux inotify); false: a rescan every 500 ms.
  bool event_driven() const { return inotify_fd_ >= 0; }

 private:
  std::vector<WatchEvent> rescan();
  void watch_folder(const std::string& path);

  std::string dir_;
  int inotify_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that stop() writes
  std::atomic<bool> stopped_{false};
  std::map<int, std::string> watches_;        // watch descriptor -> folder
  std::map<std::string, std::string> known_;  // snapshot folder -> manifest id ("" while pending)
  bool first_ = true;
};

}  // namespace ckptdoc::snapshot
