#pragma once
// A run's snapshots over time, for `ckptdoc watch` and the app's attach mode (Qt-free): one summary per
// snapshot (worst finding, exact fraction, grad norm, loss scale, NaN/Inf counts, per-param agreement) and
// the findings only a series shows (the loss scale collapsing, most steps skipped, a gradient-norm spike).
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/deepspeed/open_options.h"  // Checkpoint

namespace ckptdoc::snapshot {

// One param's lp-vs-fp32 agreement at one snapshot.
struct ParamPoint {
  double exact_fraction = std::numeric_limits<double>::quiet_NaN();
  double rel_l2 = std::numeric_limits<double>::quiet_NaN();
  double max_abs = std::numeric_limits<double>::quiet_NaN();
  uint64_t nonfinite = 0;  // NaN/Inf in its lp, fp32 and moments
};

struct SnapshotSummary {
  std::string dir, tag, id;
  double created_unix = 0;
  int64_t global_steps = 0, skipped_steps = 0;
  std::string worst_severity;  // "error", "warning", "info", or "" when there is no finding
  std::string worst_code;
  std::vector<std::string> codes;  // every finding, worst first
  // Share of elements whose lp equals round(fp32), over every param compared (NaN when none was: ZeRO-3).
  double exact_fraction = std::numeric_limits<double>::quiet_NaN();
  std::optional<double> grad_norm;   // of the recorded gradients, else DeepSpeed's last
  std::optional<double> loss_scale;  // fp16
  std::optional<bool> overflow;
  uint64_t nonfinite_values = 0;  // NaN/Inf in lp, fp32 and moments
  uint64_t nonfinite_grads = 0;
  std::map<std::string, ParamPoint> params;
  bool deleted = false;  // the folder went away after it was read (rotated by every(keep=K))
};

// The summary of a diagnosed snapshot (a checkpoint works too: no live numbers then).
SnapshotSummary summarize(const deepspeed::Checkpoint& ckpt, const analysis::Report& report);

struct TimelineThresholds {
  double loss_scale_drop = 256;   // current scale at most peak / this: the scale is collapsing
  double skipped_fraction = 0.5;  // this share of the steps since the previous snapshot skipped (overflow)
  double grad_norm_spike = 10;    // grad norm at least this many times the median of the earlier snapshots
};

class Timeline {
 public:
  // Adds a snapshot's summary in step order (replacing an earlier point of the same folder) and returns the
  // findings that only the series shows at it; they are also added to the stored point's codes and worst.
  std::vector<analysis::Finding> add(SnapshotSummary s, const TimelineThresholds& thresholds = {});
  // The folder was deleted: the point stays, marked (its data can no longer be opened).
  void mark_deleted(const std::string& dir);
  const std::vector<SnapshotSummary>& points() const { return points_; }
  // (global_steps, value) of one param over the snapshots that compared it. metric: "exact_fraction",
  // "rel_l2", "max_abs" or "nonfinite".
  std::vector<std::pair<int64_t, double>> param_series(const std::string& name,
                                                       const std::string& metric) const;

 private:
  std::vector<SnapshotSummary> points_;
};

}  // namespace ckptdoc::snapshot
