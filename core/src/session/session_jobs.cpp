// Session jobs that produce something for the user rather than change the session's state: repair plans and
// runs, verification, universal conversion, export, a param's density, a diff against another source, and
// watching a run.
#include <algorithm>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/session/session.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/diff_side.h"
#include "ckptdoc/sources/deepspeed/export.h"
#include "ckptdoc/sources/deepspeed/param_density.h"
#include "ckptdoc/sources/diff_side.h"
#include "ckptdoc/sources/snapshot/timeline.h"

namespace ckptdoc::session {

namespace {

std::shared_ptr<const deepspeed::Checkpoint> require(
    const std::shared_ptr<const deepspeed::Checkpoint>& ckpt) {
  if (!ckpt) throw Error(ckptdoc::ErrorKind::InvalidRequest, "", "session", "no checkpoint is open");
  return ckpt;
}

// The open self-reporting source, for a job on it; a job asked for while none is open fails with this.
const sources::Source& require_source(const std::shared_ptr<const sources::Source>& source) {
  if (!source)
    throw Error(ckptdoc::ErrorKind::InvalidRequest, "", "session",
                "no self-reporting source (DCP, Accelerate, Megatron-core) is open");
  return *source;
}

}  // namespace

JobPtr Session::plan_repair(const std::string& output, const repair::RepairRequest& request,
                            Done<repair::Plan> done) {
  auto ckpt = checkpoint_;
  return queue_.submit<repair::Plan>(
      JobKind::Plan, "plan", "Planning the repair",
      [ckpt, output, request](JobQueue::Context& c) {
        c.progress().set_stage("planning", 0);
        return repair::make_plan(*require(ckpt), output, request);
      },
      std::move(done));
}

JobPtr Session::run_repair(const std::string& output, const repair::RepairRequest& request,
                           Done<repair::RepairResult> done) {
  auto ckpt = checkpoint_;
  return queue_.submit<repair::RepairResult>(
      JobKind::Repair, "", "Repairing into " + output,
      [ckpt, output, request](JobQueue::Context& c) {
        return repair::run_repair(*require(ckpt), output, request, &c.progress());
      },
      std::move(done));
}

JobPtr Session::convert_to_universal(const std::string& output, const universal::ToUniversalOptions& options,
                                     Done<universal::ConvertResult> done) {
  auto ckpt = checkpoint_;
  return queue_.submit<universal::ConvertResult>(
      JobKind::Convert, "", "Converting to universal into " + output,
      [ckpt, output, options](JobQueue::Context& c) {
        return universal::convert_to_universal(*require(ckpt), output, options, &c.progress());
      },
      std::move(done));
}

JobPtr Session::verify(const std::string& path, Done<Verification> done) {
  analysis::DiagnoseOptions o;
  o.device = settings_.device;
  o.threads = settings_.threads;
  return queue_.submit<Verification>(
      JobKind::Verify, "", "Verifying " + path,
      [path, o](JobQueue::Context& c) {
        c.progress().set_stage("opening " + path, 0);
        auto ckpt = deepspeed::Checkpoint::open(path);
        Verification v;
        v.path = path;
        v.report = deepspeed::diagnose(*ckpt, o, &c.progress());
        v.invariant_failures = repair::check_loader_invariants(*ckpt);
        return v;
      },
      std::move(done));
}

JobPtr Session::export_weights(const std::string& out, const deepspeed::ExportOptions& options,
                               Done<deepspeed::ExportResult> done) {
  auto ckpt = checkpoint_;
  return queue_.submit<deepspeed::ExportResult>(
      JobKind::Export, "", "Exporting to " + out,
      [ckpt, out, options](JobQueue::Context& c) {
        return deepspeed::export_weights(*require(ckpt), out, options, &c.progress());
      },
      std::move(done));
}

JobPtr Session::repair_source(sources::RepairRequest request, Done<sources::Outcome> done) {
  auto source = repairing_source() ? source_ : nullptr;
  request.path = path_;
  const std::string title = "Repairing into " + request.output;
  return queue_.submit<sources::Outcome>(
      JobKind::Repair, "", title,
      [source, request](JobQueue::Context& c) {
        const sources::Source& open = require_source(source);
        c.progress().set_stage("writing the repaired copy", 0);
        sources::RepairRequest counted = request;
        counted.progress = &c.progress();  // the copy's bytes, then the records rewritten; cancel between
        return open.repair(counted);
      },
      std::move(done));
}

JobPtr Session::export_source(sources::ExportRequest request, Done<sources::ExportOutcome> done) {
  auto source = storage_ ? source_ : nullptr;
  request.path = path_;
  const std::string title = "Exporting to " + request.output;
  return queue_.submit<sources::ExportOutcome>(
      JobKind::Export, "", title,
      [source, request](JobQueue::Context& c) {
        const sources::Source& open = require_source(source);
        c.progress().set_stage("exporting the weights", 0);
        sources::ExportRequest counted = request;
        counted.progress = &c.progress();  // the bytes written; cancel between steps of a few MiB
        return open.export_weights(counted);
      },
      std::move(done));
}

JobPtr Session::density(const std::string& param, int bins, Done<analysis::Density2D> done) {
  auto ckpt = checkpoint_;
  const auto ref = find_param(param);
  return queue_.submit<analysis::Density2D>(
      JobKind::Density, "density", "Density of " + param,
      [ckpt, ref, param, bins](JobQueue::Context& c) {
        if (!ref)
          throw Error(ckptdoc::ErrorKind::NotFound, require(ckpt)->catalog().tag_dir, "param " + param,
                      "not a trainable param");
        return deepspeed::param_density(*require(ckpt), ref->group, ref->param, bins, &c.progress());
      },
      std::move(done));
}

JobPtr Session::diff(const std::string& other, const analysis::DiffOptions& options,
                     Done<analysis::DiffResult> done) {
  auto ckpt = checkpoint_;
  // A self-reporting source (a DCP folder, ...) is opened again on the worker as a diff side: its weights.
  const std::string source_path = ckpt || !storage_ ? std::string() : path_;
  return queue_.submit<analysis::DiffResult>(
      JobKind::Diff, "diff", "Comparing with " + other,
      [ckpt, source_path, other, options](JobQueue::Context& c) {
        const auto a = source_path.empty()
                           ? sources::OpenedDiffSide{deepspeed::diff_side(*require(ckpt), options.what), ckpt}
                           : sources::open_diff_side(source_path, options.what);
        c.progress().set_stage("opening " + other, 0);
        const auto b = sources::open_diff_side(other, options.what);
        c.check();
        return analysis::diff(a.side, b.side, options, &c.progress());
      },
      std::move(done));
}

// One thing a watch read from its feed, waiting on the worker to travel to the UI thread with the rest of
// its batch.
struct Session::WatchItem {
  enum class Kind { Sample, Removed, Skipped } kind = Kind::Sample;
  WatchSample sample;  // Sample
  JobError error;      // Removed, Skipped: what the notice says (error.file: the folder)
};

JobPtr Session::watch(const std::shared_ptr<SnapshotFeed>& feed, Done<size_t> done, bool follow) {
  analysis::DiagnoseOptions o;
  o.device = settings_.device;
  o.threads = settings_.threads;
  if (follow) o.verify_checksums = settings_.verify_checksums;  // it stands in for the analysis on open
  return queue_.submit<size_t>(
      JobKind::Watch, "watch", "Watching",
      [this, feed, o, follow](JobQueue::Context& c) {
        size_t n = 0;
        snapshot::Timeline timeline;  // the findings only the series shows (loss scale collapsing, ...)
        // What the feed had at hand together (a folder's first scan, one burst of events) is read here and
        // delivered as one update: the views refresh once per batch, not once per snapshot.
        std::vector<WatchItem> batch;
        // The checkpoint of the batch's last sample: with `follow`, the one shown.
        std::shared_ptr<const deepspeed::Checkpoint> newest;
        auto flush = [&] {
          if (batch.empty()) return;
          std::optional<Analysis> shown;
          if (follow && newest)
            for (auto it = batch.rbegin(); it != batch.rend(); ++it)
              if (it->kind == WatchItem::Kind::Sample) {
                shown = prepare_analysis(it->sample.report, newest->catalog());
                break;
              }
          // The state changes on the UI thread only: the batch travels there.
          c.post(
              [this, batch = std::move(batch), ckpt = std::move(newest), shown = std::move(shown)]() mutable {
                apply_watch_batch(std::move(batch), std::move(ckpt), std::move(shown));
              });
          batch.clear();
          newest.reset();
        };
        while (auto snap = feed->next(c.progress())) {
          if (snap->removed) {
            WatchItem gone{WatchItem::Kind::Removed,
                           {},
                           {ErrorKind::Input, snap->label + ": the snapshot was deleted", snap->path, {}}};
            batch.push_back(std::move(gone));
            if (!feed->ready()) flush();
            continue;
          }
          std::shared_ptr<const deepspeed::Checkpoint> ckpt;
          std::shared_ptr<const analysis::Report> report;
          try {
            c.progress().set_stage("reading " + snap->label, 0);
            ckpt = deepspeed::Checkpoint::open(snap->path, snap->options);
            report = std::make_shared<const analysis::Report>(deepspeed::diagnose(*ckpt, o, &c.progress()));
          } catch (const Cancelled&) {
            throw;
          } catch (const std::exception&) {  // deleted meanwhile (rotation), or damaged: the watch goes on
            JobError e = current_exception_error();
            if (e.file.empty()) e.file = snap->path;
            e.message = snap->label + ": " + e.message;
            batch.push_back({WatchItem::Kind::Skipped, {}, std::move(e)});
            if (!feed->ready()) flush();
            continue;
          }
          WatchSample s;
          s.summary = snapshot::summarize(*ckpt, *report);
          timeline.add(s.summary);
          for (const auto& p : timeline.points())
            if (p.dir == s.summary.dir) s.summary = p;  // with its series-only findings
          // A live snapshot's step is the engine's at the dump (the summary has it); a checkpoint's, its own.
          s.step = snap->step.value_or(s.summary.global_steps);
          s.snapshot = std::move(*snap);
          s.metrics = snapshot_metrics(*report);
          s.report = std::move(report);
          for (auto& b : batch) b.sample.report.reset();  // only the newest report is kept
          batch.push_back({WatchItem::Kind::Sample, std::move(s), {}});
          newest = std::move(ckpt);
          ++n;
          if (!feed->ready()) flush();
        }
        flush();
        return n;
      },
      std::move(done));
}

// UI thread. Notices first (they concern samples already shown), then the samples, then the newest shown, and
// one WatchSample for the lot.
void Session::apply_watch_batch(std::vector<WatchItem>&& batch,
                                std::shared_ptr<const deepspeed::Checkpoint> ckpt,
                                std::optional<Analysis> shown) {
  for (const auto& item : batch) {
    if (item.kind == WatchItem::Kind::Removed) {
      for (auto& s : samples_)
        if (s.snapshot.path == item.error.file) s.removed = true;
      notify(Event::WatchRemoved, nullptr, &item.error);
    } else if (item.kind == WatchItem::Kind::Skipped) {
      notify(Event::WatchSkipped, nullptr, &item.error);
    }
  }
  std::string path;
  bool any = false;
  for (auto& item : batch)
    if (item.kind == WatchItem::Kind::Sample) {
      path = item.sample.snapshot.path;
      add_watch_sample(std::move(item.sample));
      any = true;
    }
  if (shown && ckpt) adopt_watched(path, std::move(ckpt), std::move(*shown));
  if (any) notify(Event::WatchSample, nullptr, nullptr);
}

// A re-dumped snapshot (a new version in the same folder, as snapshot::Timeline keys its points) replaces its
// older sample, whose points leave the series with it.
void Session::add_watch_sample(WatchSample s) {
  const auto same = std::find_if(samples_.begin(), samples_.end(),
                                 [&](const WatchSample& w) { return w.summary.dir == s.summary.dir; });
  if (same != samples_.end()) {
    samples_.erase(same);
    series_.clear();
    for (const auto& w : samples_)
      for (const auto& [name, value] : w.metrics) series_.append(name, w.step, value);
  }
  for (const auto& [name, value] : s.metrics) series_.append(name, s.step, value);
  if (!samples_.empty()) samples_.back().report.reset();  // keep the newest report only
  samples_.push_back(std::move(s));
}

}  // namespace ckptdoc::session
