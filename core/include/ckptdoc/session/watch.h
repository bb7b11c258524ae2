#pragma once
// The hooks for watching a run: a feed of snapshots (a live run's dumps, or saved checkpoints replayed in
// order), the numbers recorded per snapshot, and their history as time series that views plot against the
// training step. A Session's watch job pulls from the feed, analyses each snapshot on a worker and appends
// its numbers on the UI thread.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/deepspeed/open_options.h"
#include "ckptdoc/sources/snapshot/timeline.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::session {

// One snapshot of a watched run: whatever Checkpoint::open takes.
struct Snapshot {
  std::string path;
  deepspeed::OpenOptions options;
  std::optional<int64_t> step;  // the x of its points; default: the live engine's step, else global_steps
  std::string label;            // e.g. the tag, shown in the timeline
  bool removed = false;         // the feed saw this snapshot go away: nothing to open, only the notice
};

// Where a watch gets its snapshots. next() blocks until the next one is ready (checking progress.check()
// while it waits) and returns nullopt when the run is over.
class SnapshotFeed {
 public:
  virtual ~SnapshotFeed() = default;
  virtual std::optional<Snapshot> next(Progress& progress) = 0;
  // True when next() would return at once with something the feed already holds (the rest of one folder scan,
  // or of one burst of file-system events): the watch then delivers what it read as one update, so a view
  // refreshes once per scan rather than once per snapshot. A fixed list says false (one update per item).
  virtual bool ready() { return false; }
};
// A fixed list, in order.
std::unique_ptr<SnapshotFeed> list_feed(std::vector<Snapshot> snapshots);
// A folder of live-run snapshots (ckptdoc_hook's out_dir), followed by snapshot::SnapshotWatcher (inotify):
// first the committed snapshots already there, oldest first, then each one as its manifest appears, and a
// `removed` snapshot when one goes away. A re-dumped tag (same folder, new manifest id) comes again. ready()
// holds while the current rescan's events last. Never ends by itself (cancel the watch); next() throws
// ckptdoc::Error when `dir` is not a folder.
std::unique_ptr<SnapshotFeed> folder_feed(std::string dir);

struct SeriesPoint {
  int64_t step = 0;
  double value = 0;
};
struct TimeSeries {
  std::string name;  // e.g. "min_exact_fraction"
  std::vector<SeriesPoint> points;
};

// Named series; revision() moves on every change so a view redraws only then.
class TimeSeriesSet {
 public:
  void append(const std::string& name, int64_t step, double value);
  const TimeSeries* find(const std::string& name) const;
  const std::vector<TimeSeries>& all() const { return series_; }
  uint64_t revision() const { return revision_; }
  void clear();

 private:
  std::vector<TimeSeries> series_;
  uint64_t revision_ = 0;
};

// The numbers a watch records for one analysed snapshot: "min_exact_fraction", "max_rel_l2",
// "nonfinite_elements", "errors", "warnings", "exp_avg_sq_mean" (over all params).
std::vector<std::pair<std::string, double>> snapshot_metrics(const analysis::Report& report);

// What the UI thread receives per snapshot.
struct WatchSample {
  Snapshot snapshot;
  int64_t step = 0;
  std::vector<std::pair<std::string, double>> metrics;
  std::shared_ptr<const analysis::Report> report;
  // Its summary (worst finding, exact fraction, grad norm, loss scale, NaN/Inf, per-param agreement, and the
  // findings only the series shows, as in `ckptdoc watch`), made on the worker: what the app's timeline
  // plots.
  snapshot::SnapshotSummary summary;
  bool removed = false;  // its folder went away after it was read
};

}  // namespace ckptdoc::session
