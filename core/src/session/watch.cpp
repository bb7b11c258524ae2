#include "ckptdoc/session/watch.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "ckptdoc/sources/snapshot/watcher.h"

namespace ckptdoc::session {

namespace {

class ListFeed final : public SnapshotFeed {
 public:
  explicit ListFeed(std::vector<Snapshot> s) : snapshots_(std::move(s)) {}
  std::optional<Snapshot> next(Progress& progress) override {
    progress.check();
    if (next_ >= snapshots_.size()) return std::nullopt;
    return snapshots_[next_++];
  }

 private:
  std::vector<Snapshot> snapshots_;
  size_t next_ = 0;
};

class FolderFeed final : public SnapshotFeed {
 public:
  explicit FolderFeed(std::string dir) : dir_(std::move(dir)) {}
  std::optional<Snapshot> next(Progress& progress) override {
    // Made here, on the worker: the first scan reads the folder.
    if (!watcher_) watcher_ = std::make_unique<snapshot::SnapshotWatcher>(dir_);
    for (;;) {
      progress.check();
      while (!events_.empty()) {
        snapshot::WatchEvent e = std::move(events_.front());
        events_.pop_front();
        if (e.kind == snapshot::WatchEvent::Kind::Pending) continue;  // no manifest yet: never read
        Snapshot s;
        s.path = e.dir;
        s.label = e.tag;
        s.removed = e.kind == snapshot::WatchEvent::Kind::Removed;
        return s;
      }
      progress.set_stage("waiting for snapshots in " + dir_, 0);
      // Woken by the file system; the timeout only bounds how long a cancel waits.
      for (auto& e : watcher_->wait(250)) events_.push_back(std::move(e));
    }
  }
  bool ready() override {
    while (!events_.empty() && events_.front().kind == snapshot::WatchEvent::Kind::Pending)
      events_.pop_front();
    return !events_.empty();
  }

 private:
  std::string dir_;
  std::unique_ptr<snapshot::SnapshotWatcher> watcher_;
  std::deque<snapshot::WatchEvent> events_;
};

}  // namespace

std::unique_ptr<SnapshotFeed> folder_feed(std::string dir) {
  return std::make_unique<FolderFeed>(std::move(dir));
}

std::unique_ptr<SnapshotFeed> list_feed(std::vector<Snapshot> snapshots) {
  return std::make_unique<ListFeed>(std::move(snapshots));
}

void TimeSeriesSet::append(const std::string& name, int64_t step, double value) {
  auto it = std::find_if(series_.begin(), series_.end(), [&](const TimeSeries& s) { return s.name == name; });
  if (it == series_.end()) {
    series_.push_back(TimeSeries{name, {}});
    it = std::prev(series_.end());
  }
  it->points.push_back({step, value});
  ++revision_;
}

const TimeSeries* TimeSeriesSet::find(const std::string& name) const {
  auto it = std::find_if(series_.begin(), series_.end(), [&](const TimeSeries& s) { return s.name == name; });
  return it == series_.end() ? nullptr : &*it;
}

void TimeSeriesSet::clear() {
  series_.clear();
  ++revision_;
}

std::vector<std::pair<std::string, double>> snapshot_metrics(const analysis::Report& report) {
  double min_exact = 1.0, max_rel = 0, sq_sum = 0;
  uint64_t nonfinite = 0, sq_count = 0;
  bool any_pair = false;
  for (const auto& p : report.params) {
    if (p.lp_vs_fp32 && p.lp_vs_fp32->count) {
      any_pair = true;
      min_exact = std::min(min_exact, p.lp_vs_fp32->exact_fraction());
      const double rel = p.lp_vs_fp32->rel_l2();
      if (std::isfinite(rel)) max_rel = std::max(max_rel, rel);
    }
    for (const auto* s : {&p.lp, &p.fp32, &p.exp_avg, &p.exp_avg_sq})
      if (*s) nonfinite += (*s)->count - (*s)->finite_count();
    if (p.exp_avg_sq) {
      sq_sum += p.exp_avg_sq->sum;
      sq_count += p.exp_avg_sq->finite_count();
    }
  }
  int errors = 0, warnings = 0;
  for (const auto& f : report.findings) {
    errors += f.severity == analysis::Severity::Error;
    warnings += f.severity == analysis::Severity::Warning;
  }
  std::vector<std::pair<std::string, double>> m;
  if (any_pair) {
    m.emplace_back("min_exact_fraction", min_exact);
    m.emplace_back("max_rel_l2", max_rel);
  }
  m.emplace_back("nonfinite_elements", static_cast<double>(nonfinite));
  m.emplace_back("errors", errors);
  m.emplace_back("warnings", warnings);
  if (sq_count) m.emplace_back("exp_avg_sq_mean", sq_sum / static_cast<double>(sq_count));
  return m;
}

}  // namespace ckptdoc::session
