#pragma once
// One open source and the jobs on it, for every front end (RenderDoc's replay controller, ImHex's task
// manager): open, analyse, plan/run/verify a repair, export, the density of a param, watch a run. Each is an
// asynchronous job with progress, cancel and a result or a typed error (session/job.h), run on a worker and
// delivered by poll() on the UI thread, which alone changes the session's state; so the queries views draw
// from (findings, params by severity, layout pictures, histograms, time series) need no locks and never touch
// a file.
//
// Sources: open() takes exactly what deepspeed::Checkpoint::open takes, so every kind of source core can open
// (save folders, universal checkpoints, Hugging Face folders, live-run snapshots) opens here the same way. A
// source the registry says does not read into the catalog (PyTorch DCP, Accelerate FSDP, Megatron-core) opens
// as its storage map (storage_map()) and is analysed by its own diagnosis (source_diagnosis()): the views
// draw both without asking which source it is. Diff jobs go through queue().submit() with JobKind::Diff in
// the same manner.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/analysis/density.h"
#include "ckptdoc/analysis/diff.h"
#include "ckptdoc/analysis/report.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/session/job.h"
#include "ckptdoc/session/job_queue.h"
#include "ckptdoc/session/pictures.h"
#include "ckptdoc/session/watch.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/deepspeed/export_options.h"
#include "ckptdoc/sources/deepspeed/open_options.h"  // Checkpoint
#include "ckptdoc/sources/source.h"

namespace ckptdoc::session {

struct Settings {
  DeviceKind device = DeviceKind::Auto;
  bool verify_checksums = false;  // CRC-32 of every record on each analysis
  bool analyse_on_open = true;    // a successful open starts an analysis
  unsigned threads = 0;           // CPU analysis threads (0 = all cores)
};

// What changed, for views that listen rather than read the state every frame. Listeners run inside poll()
// (or, for *Started/Opening, inside the call that started the job), on the UI thread.
enum class Event : uint8_t {
  Opening,
  Opened,
  OpenFailed,
  Closed,
  AnalysisStarted,
  AnalysisFinished,
  AnalysisFailed,
  AnalysisCancelled,
  WatchSample,   // watched snapshots' numbers were added to samples() and series(): once per batch (all the
                 // snapshots a folder held when attached, one burst of file-system events)
  WatchRemoved,  // a watched snapshot went away (error->file: its folder); what was read from it stays
  WatchSkipped,  // a watched snapshot could not be read (deleted meanwhile, damaged): error says why
};
std::string_view event_name(Event e);

// What an analysis produces, all computed on the worker: the report and what the pictures need from it.
struct Analysis {
  std::shared_ptr<const analysis::Report> report;
  std::shared_ptr<const HealthMap> health;
  std::vector<int> by_severity;             // indices into report->params, worst first
  std::map<int, DivergenceStats> per_rank;  // lp-vs-fp32 divergence per dp rank over every param
  // A self-reporting source's diagnosis (its findings are also the report's); null for the catalog's.
  std::shared_ptr<const sources::SourceDiagnosis> diagnosis;
};
// Builds the rest of an Analysis from a report (on a worker: it walks every param).
Analysis prepare_analysis(std::shared_ptr<const analysis::Report> report, const model::Catalog& catalog);

// A folder diagnosed again after a repair, or any time: the report and DeepSpeed's loader invariants.
struct Verification {
  std::string path;
  analysis::Report report;
  std::vector<std::string> invariant_failures;
  bool clean() const { return !report.has_error() && invariant_failures.empty(); }
};

// Where a trainable param lives: its group and index there, and its row in report()->params (-1 before
// analysis).
struct ParamRef {
  int group = -1, param = -1;
  int report_index = -1;
};

template <class T>
using Done = std::function<void(Outcome<T>&)>;

class Session {
 public:
  explicit Session(Settings settings = {});
  ~Session();  // cancels every job and waits for the workers; no callback runs afterwards
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // --- Delivery
  // Called from a worker when poll() has something to deliver (see JobQueue::set_wake).
  void set_wake(std::function<void()> wake) { queue_.set_wake(std::move(wake)); }
  // UI thread: applies finished jobs to the state, runs callbacks and listeners; returns how many callbacks
  // ran.
  size_t poll() { return queue_.poll(); }
  using Listener = std::function<void(Event event, const JobPtr& job, const JobError* error)>;
  int listen(Listener listener);
  void unlisten(int id);
  JobQueue& queue() { return queue_; }
  std::vector<JobPtr> jobs() const { return queue_.jobs(); }  // the task list: queued and running jobs
  Settings& settings() { return settings_; }
  const Settings& settings() const { return settings_; }

  // --- Sources
  // Opens a source on a worker (catalog only: zip directories and pickles); on success it replaces the
  // current one, supersedes the jobs on the old one and (settings().analyse_on_open) starts an analysis. A
  // failed open leaves the current source as it was.
  JobPtr open(const std::string& path, const deepspeed::OpenOptions& options = {},
              const Done<std::shared_ptr<const deepspeed::Checkpoint>>& done = {});
  void close();
  bool is_open() const { return checkpoint_ != nullptr || storage_ != nullptr; }
  const std::string& path() const { return path_; }
  std::shared_ptr<const deepspeed::Checkpoint> checkpoint() const { return checkpoint_; }
  // The neutral catalog the views read (null for a self-reporting source): no view needs what only
  // DeepSpeed's files record.
  const model::Catalog* catalog() const;
  // The same, sharing ownership of the opened source it points into: what a view holds while a layout is
  // drawn on a worker, so no view names the DeepSpeed reader's type.
  std::shared_ptr<const model::Catalog> shared_catalog() const;
  // A self-reporting source's files and keys (null when the open source is the catalog's).
  const sources::StorageMap* storage_map() const { return storage_.get(); }
  // The self-reporting source that reads it (null when the open source is the catalog's).
  const sources::Source* storage_source() const { return storage_ ? source_.get() : nullptr; }
  // The source whose own repair repair_source() runs: a self-reporting source, or a folder the catalog reads
  // whose repairs are not DeepSpeed's (a Trainer or Accelerate optimizer folder); null otherwise.
  const sources::Source* repairing_source() const {
    return source_ && source_->repairs_itself() ? source_.get() : nullptr;
  }
  // Its diagnosis, once analysed: findings() holds the same findings.
  const sources::SourceDiagnosis* source_diagnosis() const { return analysis_.diagnosis.get(); }
  // Moves whenever the source or its analysis changes: a view caches what it drew under it.
  uint64_t generation() const { return generation_; }
  JobPtr opening() const { return open_job_; }

  // --- Analysis (coalesced: a new one supersedes the running one)
  JobPtr analyse(Done<Analysis> done = {});
  void cancel_analysis();
  bool analysing() const { return analysis_job_ && !analysis_job_->finished(); }
  JobPtr analysis_job() const { return analysis_job_; }
  const analysis::Report* report() const { return analysis_.report.get(); }
  std::shared_ptr<const analysis::Report> report_ptr() const { return analysis_.report; }
  const HealthMap* health() const { return analysis_.health.get(); }
  std::shared_ptr<const HealthMap> health_ptr() const { return analysis_.health; }
  const std::optional<JobError>& analysis_error() const { return analysis_error_; }

  // ZeRO-3: 16-bit weights saved elsewhere (a file or folder) that the next analyses compare the fp32
  // partitions with (diagnose --lp-source); nullopt: only weights saved beside the checkpoint. Opening
  // another source clears it; call analyse() to apply it.
  void set_lp_source(std::optional<std::string> path) { lp_source_ = std::move(path); }
  const std::optional<std::string>& lp_source() const { return lp_source_; }

  // --- Repairs
  // The plan of a repair of the open source (coalesced: only the newest request's plan arrives).
  JobPtr plan_repair(const std::string& output, const repair::RepairRequest& request,
                     Done<repair::Plan> done);
  // Writes the repair into `output` and verifies it (repair::run_repair); never superseded.
  JobPtr run_repair(const std::string& output, const repair::RepairRequest& request,
                    Done<repair::RepairResult> done);
  // Opens and diagnoses any folder, and checks DeepSpeed's loader invariants on it.
  JobPtr verify(const std::string& path, Done<Verification> done);
  // The request that fixes a finding's repair kind on this source.
  static repair::RepairRequest repair_request_for(analysis::RepairKind kind, const model::Catalog& catalog,
                                                  DeviceKind device);
  // "<input>-fixed" beside the input (then -2, -3, ... when taken).
  static std::string default_repair_output(const model::Catalog& catalog);
  // The repair of a self-reporting source (repairing_source()): its own repaired copy in request.output, as
  // `ckptdoc repair` writes it (request.path is set to the open source's); the outcome's text is what the CLI
  // prints. It reports the copy's bytes, then the records rewritten, and stops at a cancel part way,
  // publishing nothing.
  JobPtr repair_source(sources::RepairRequest request, Done<sources::Outcome> done);
  // "<folder>-fixed" beside the open source's folder (then -2, -3, ... when taken).
  std::string default_source_repair_output() const;

  // --- Convert (never superseded)
  // Writes the open ZeRO-1/2 or BF16_Optimizer checkpoint as a universal checkpoint into `output`
  // (universal::convert_to_universal) and verifies it by re-opening it.
  JobPtr convert_to_universal(const std::string& output, const universal::ToUniversalOptions& options,
                              Done<universal::ConvertResult> done);
  // "<input>-universal" beside the input (then -2, -3, ... when taken).
  static std::string default_universal_output(const model::Catalog& catalog);

  // --- Export (never superseded)
  JobPtr export_weights(const std::string& out, const deepspeed::ExportOptions& options,
                        Done<deepspeed::ExportResult> done);
  static std::string default_export_path(const model::Catalog& catalog, deepspeed::ExportFormat format);
  // The export of a self-reporting source (storage_source()): its weights as its own export writes them, as
  // `ckptdoc export` does; request.path is set to the open source's. It reports the bytes written and
  // stops at a cancel part way, publishing nothing.
  JobPtr export_source(sources::ExportRequest request, Done<sources::ExportOutcome> done);
  // "<folder>-weights.safetensors" (".bin" for torch) beside the open source's folder.
  std::string default_source_export_path(bool torch) const;

  // --- The weight-vs-master density of one param, streamed from the map (coalesced)
  JobPtr density(const std::string& param, int bins, Done<analysis::Density2D> done);

  // --- Diff: the open source (A) against another source (B, opened on the worker), tensor by tensor
  // (coalesced: a new request supersedes the running one; opening another source supersedes it too).
  JobPtr diff(const std::string& other, const analysis::DiffOptions& options,
              Done<analysis::DiffResult> done);

  // --- Watch: analyses every snapshot of a feed, appending its numbers to series() (coalesced). What the
  // feed holds together (SnapshotFeed::ready()) arrives as one update. A snapshot read again from the same
  // folder (a re-dumped tag) replaces its older sample. A snapshot that cannot be read is reported
  // (Event::WatchSkipped) and the watch goes on. With `follow` (the app's
  // attach mode) each snapshot also becomes the open source with its analysis, as if opened and analysed
  // (Event::Opened then AnalysisFinished), without ending the watch; opening another source ends it.
  JobPtr watch(const std::shared_ptr<SnapshotFeed>& feed, Done<size_t> done = {}, bool follow = false);
  const TimeSeriesSet& series() const { return series_; }
  const std::vector<WatchSample>& samples() const { return samples_; }  // reports kept for the last one only

  // --- Queries (UI thread; from the state poll() applied)
  // The analysis' findings, or before it the catalog's problems as findings.
  const std::vector<analysis::Finding>& findings() const { return findings_; }
  const std::vector<int>& params_by_severity() const { return analysis_.by_severity; }
  std::optional<ParamRef> find_param(const std::string& name) const;
  const analysis::ParamReport* param_report(const std::string& name) const;
  std::string worst_param() const;  // empty before analysis
  const std::map<int, DivergenceStats>& per_rank_divergence() const { return analysis_.per_rank; }
  Raster layout_raster(const LayoutRasterRequest& request) const;
  std::vector<StripColumn> param_strip(StripLane lane, int width) const;
  std::string describe_fragment(int group, const LayoutHit& hit) const;
  std::string describe_param(int group, int param) const;

 private:
  void notify(Event e, const JobPtr& job, const JobError* error);
  void apply_source(const std::string& path, std::shared_ptr<const deepspeed::Checkpoint> ckpt,
                    std::shared_ptr<const sources::Source> source = nullptr,
                    std::shared_ptr<const sources::StorageMap> storage = nullptr);
  void set_source(const std::string& path, std::shared_ptr<const deepspeed::Checkpoint> ckpt);
  // An analysis job's outcome on the UI thread: applied and announced while `current` (still the open
  // source's latest analysis), a failure recorded, then the caller's callback.
  void deliver_analysis(bool current, Outcome<Analysis>& o, const Done<Analysis>& done);
  void apply_analysis(Analysis analysis);
  JobPtr analyse_source(const Done<Analysis>& done);
  void adopt_watched(const std::string& path, std::shared_ptr<const deepspeed::Checkpoint> ckpt,
                     Analysis analysis);
  void reset_analysis();
  struct WatchItem;
  void apply_watch_batch(std::vector<WatchItem>&& batch, std::shared_ptr<const deepspeed::Checkpoint> ckpt,
                         std::optional<Analysis> shown);
  void add_watch_sample(WatchSample s);

  Settings settings_;
  std::string path_;
  std::optional<std::string> lp_source_;
  std::shared_ptr<const deepspeed::Checkpoint> checkpoint_;
  // A self-reporting source instead (checkpoint_ null): the source and its storage map.
  std::shared_ptr<const sources::Source> source_;
  std::shared_ptr<const sources::StorageMap> storage_;
  Analysis analysis_;
  std::optional<JobError> analysis_error_;
  std::vector<analysis::Finding> findings_;
  std::map<std::string, ParamRef> params_by_name_;
  // Report rows of tensors no param group holds (a weights folder, a checkpoint without optimizer state):
  // their plots come from the report alone.
  std::map<std::string, size_t> rows_without_group_;
  TimeSeriesSet series_;
  std::vector<WatchSample> samples_;
  JobPtr open_job_, analysis_job_;
  uint64_t generation_ = 0;
  std::map<int, Listener> listeners_;
  int next_listener_ = 0;
  JobQueue queue_;  // last: destroyed (workers joined) before the state its callbacks touch
};

}  // namespace ckptdoc::session
