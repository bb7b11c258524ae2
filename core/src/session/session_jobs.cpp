// Session jobs that produce something for the user rather than change the session's state: repair plans and
// runs, verification, export, a param's density, a diff against another source, and watching a run.
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/analysis/param_density.h"
#include "ckptdoc/error.h"
#include "ckptdoc/session/session.h"
#include "ckptdoc/snapshot/timeline.h"

namespace ckptdoc::session {

namespace {

std::shared_ptr<const deepspeed::Checkpoint> require(
    const std::shared_ptr<const deepspeed::Checkpoint>& ckpt) {
  if (!ckpt) throw Error("", "session", "no checkpoint is open");
  return ckpt;
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
        v.report = analysis::diagnose(*ckpt, o, &c.progress());
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

JobPtr Session::density(const std::string& param, int bins, Done<analysis::Density2D> done) {
  auto ckpt = checkpoint_;
  const auto ref = find_param(param);
  return queue_.submit<analysis::Density2D>(
      JobKind::Density, "density", "Density of " + param,
      [ckpt, ref, param, bins](JobQueue::Context& c) {
        if (!ref) throw Error(require(ckpt)->catalog().tag_dir, "param " + param, "not a trainable param");
        return analysis::param_density(*require(ckpt), ref->group, ref->param, bins, &c.progress());
      },
      std::move(done));
}

JobPtr Session::diff(const std::string& other, const analysis::DiffOptions& options,
                     Done<analysis::DiffResult> done) {
  auto ckpt = checkpoint_;
  return queue_.submit<analysis::DiffResult>(
      JobKind::Diff, "diff", "Comparing with " + other,
      [ckpt, other, options](JobQueue::Context& c) {
        const auto& a = *require(ckpt);
        c.progress().set_stage("opening " + other, 0);
        const auto b = deepspeed::Checkpoint::open(other);
        c.check();
        return analysis::diff(a, *b, options, &c.progress());
      },
      std::move(done));
}

JobPtr Session::watch(std::shared_ptr<SnapshotFeed> feed, Done<size_t> done, bool follow) {
  analysis::DiagnoseOptions o;
  o.device = settings_.device;
  o.threads = settings_.threads;
  if (follow) o.verify_checksums = settings_.verify_checksums;  // it stands in for the analysis on open
  return queue_.submit<size_t>(
      JobKind::Watch, "watch", "Watching",
      [this, feed, o, follow](JobQueue::Context& c) {
        size_t n = 0;
        snapshot::Timeline timeline;  // the findings only the series shows (loss scale collapsing, ...)
        while (auto snap = feed->next(c.progress())) {
          if (snap->removed) {
            JobError gone{ErrorKind::Input, snap->label + ": the snapshot was deleted", snap->path, {}};
            c.post([this, gone] {
              for (auto& s : samples_)
                if (s.snapshot.path == gone.file) s.removed = true;
              notify(Event::WatchRemoved, nullptr, &gone);
            });
            continue;
          }
          std::shared_ptr<const deepspeed::Checkpoint> ckpt;
          std::shared_ptr<const analysis::Report> report;
          try {
            c.progress().set_stage("reading " + snap->label, 0);
            ckpt = deepspeed::Checkpoint::open(snap->path, snap->options);
            report = std::make_shared<const analysis::Report>(analysis::diagnose(*ckpt, o, &c.progress()));
          } catch (const Cancelled&) {
            throw;
          } catch (const std::exception&) {  // deleted meanwhile (rotation), or damaged: the watch goes on
            JobError e = current_exception_error();
            if (e.file.empty()) e.file = snap->path;
            e.message = snap->label + ": " + e.message;
            c.post([this, e] { notify(Event::WatchSkipped, nullptr, &e); });
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
          std::optional<Analysis> shown;
          if (follow) shown = prepare_analysis(report, ckpt->catalog());
          s.report = std::move(report);
          // The state changes on the UI thread only: the sample travels there.
          c.post([this, s = std::move(s), ckpt, shown = std::move(shown)]() mutable {
            for (const auto& [name, value] : s.metrics) series_.append(name, s.step, value);
            if (!samples_.empty()) samples_.back().report.reset();  // keep the newest report only
            const std::string path = s.snapshot.path;
            samples_.push_back(std::move(s));
            if (shown) adopt_watched(path, ckpt, std::move(*shown));
            notify(Event::WatchSample, nullptr, nullptr);
          });
          ++n;
        }
        return n;
      },
      std::move(done));
}

}  // namespace ckptdoc::session
