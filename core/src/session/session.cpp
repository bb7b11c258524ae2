// Session: the state a view draws from (source, analysis, findings, series) and the jobs that change it.
#include "ckptdoc/session/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <utility>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/repair/fix_offer.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/registry.h"

namespace fs = std::filesystem;

namespace ckptdoc::session {

namespace {

// Jobs that read the open source: superseded when another source replaces it.
const std::vector<std::string> kSourceLanes = {"open", "analyse", "plan", "density", "diff", "watch"};

std::vector<analysis::Finding> catalog_findings(const model::Catalog& catalog) {
  std::vector<analysis::Finding> out;
  for (const auto& p : catalog.problems) {
    analysis::Finding f = p;
    f.repair = analysis::RepairKind::None;  // Fix is offered once the analysis has run
    out.push_back(std::move(f));
  }
  std::stable_sort(out.begin(), out.end(), [](const analysis::Finding& a, const analysis::Finding& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  return out;
}

}  // namespace

// Everything the views need from a report, computed where the report was made (a worker).
Analysis prepare_analysis(std::shared_ptr<const analysis::Report> report, const model::Catalog& catalog) {
  Analysis a;
  a.health = HealthMap::build(catalog, *report);
  a.by_severity.resize(report->params.size());
  std::vector<double> score(report->params.size());
  for (size_t i = 0; i < report->params.size(); ++i) {
    a.by_severity[i] = static_cast<int>(i);
    score[i] = report->params[i].severity_score();
  }
  std::stable_sort(a.by_severity.begin(), a.by_severity.end(), [&](int x, int y) {
    return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)];
  });
  for (const auto& p : report->params)
    for (const auto& [rank, d] : p.per_rank) a.per_rank[rank].merge(d);
  a.report = std::move(report);
  return a;
}

std::string_view event_name(Event e) {
  switch (e) {
    case Event::Opening:
      return "opening";
    case Event::Opened:
      return "opened";
    case Event::OpenFailed:
      return "open-failed";
    case Event::Closed:
      return "closed";
    case Event::AnalysisStarted:
      return "analysis-started";
    case Event::AnalysisFinished:
      return "analysis-finished";
    case Event::AnalysisFailed:
      return "analysis-failed";
    case Event::AnalysisCancelled:
      return "analysis-cancelled";
    case Event::WatchSample:
      return "watch-sample";
    case Event::WatchRemoved:
      return "watch-removed";
    case Event::WatchSkipped:
      return "watch-skipped";
  }
  return "?";
}

const model::Catalog* Session::catalog() const {
  return checkpoint_ ? &checkpoint_->catalog() : nullptr;
}

std::shared_ptr<const model::Catalog> Session::shared_catalog() const {
  if (!checkpoint_) return nullptr;
  return {checkpoint_, &checkpoint_->catalog()};  // aliasing: owns the checkpoint, points at its catalog
}

Session::Session(Settings settings) : settings_(settings) {}

Session::~Session() {
  queue_.shutdown();
}

int Session::listen(Listener listener) {
  listeners_[++next_listener_] = std::move(listener);
  return next_listener_;
}

void Session::unlisten(int id) {
  listeners_.erase(id);
}

void Session::notify(Event e, const JobPtr& job, const JobError* error) {
  const auto copy = listeners_;  // a listener may unlisten, or start jobs that emit
  for (const auto& [id, l] : copy)
    if (l) l(e, job, error);
}

JobPtr Session::open(const std::string& path, const deepspeed::OpenOptions& options,
                     const Done<std::shared_ptr<const deepspeed::Checkpoint>>& done) {
  using Result = std::shared_ptr<const deepspeed::Checkpoint>;
  // A self-reporting source opens as its storage map; the done callback then gets a null checkpoint. The
  // worker has finished with `other` before the callback reads it.
  struct Other {
    std::shared_ptr<const sources::Source> source;
    std::shared_ptr<const sources::StorageMap> storage;
  };
  auto other = std::make_shared<Other>();
  auto job = queue_.submit<Result>(
      JobKind::Open, "open", "Opening " + path,
      [path, options, other](JobQueue::Context& c) -> Result {
        auto source = sources::find_source(path);
        if (!source->reads_into_catalog()) {
          c.progress().set_stage("reading the metadata", 0);
          if (auto map = source->storage_map(path)) {
            other->storage = std::make_shared<const sources::StorageMap>(std::move(*map));
            other->source = std::move(source);
            return nullptr;
          }
        }
        // A folder the catalog reads whose repairs are its own (a Trainer optimizer folder) keeps its source.
        if (source->repairs_itself()) other->source = std::move(source);
        c.progress().set_stage("reading the catalog", 0);
        return deepspeed::Checkpoint::open(path, options);
      },
      [this, path, done, other](Outcome<Result>& o) {
        if (o.job == open_job_) open_job_.reset();
        if (o.ok()) {
          apply_source(path, *o.value, other->source, other->storage);
          notify(Event::Opened, o.job, nullptr);
          if (settings_.analyse_on_open) analyse();
        } else if (!o.superseded()) {
          notify(Event::OpenFailed, o.job, &*o.error);
        }
        if (done) done(o);
      });
  open_job_ = job;
  notify(Event::Opening, job, nullptr);
  return job;
}

void Session::apply_source(const std::string& path, std::shared_ptr<const deepspeed::Checkpoint> ckpt,
                           std::shared_ptr<const sources::Source> source,
                           std::shared_ptr<const sources::StorageMap> storage) {
  queue_.supersede({"analyse", "plan", "density", "diff", "watch"});
  series_.clear();
  samples_.clear();
  lp_source_.reset();  // picked for the previous checkpoint
  source_ = std::move(source);
  storage_ = std::move(storage);
  set_source(path, std::move(ckpt));
}

// The watch goes on: only the jobs on the previous source end.
void Session::adopt_watched(const std::string& path, std::shared_ptr<const deepspeed::Checkpoint> ckpt,
                            Analysis analysis) {
  queue_.supersede({"analyse", "plan", "density", "diff"});
  source_.reset();
  storage_.reset();
  set_source(path, std::move(ckpt));
  notify(Event::Opened, nullptr, nullptr);
  apply_analysis(std::move(analysis));
  notify(Event::AnalysisFinished, nullptr, nullptr);
}

void Session::set_source(const std::string& path, std::shared_ptr<const deepspeed::Checkpoint> ckpt) {
  checkpoint_ = std::move(ckpt);
  path_ = path;
  reset_analysis();
  analysis_job_.reset();
  params_by_name_.clear();
  findings_.clear();
  if (checkpoint_) {
    const auto& cat = checkpoint_->catalog();
    for (size_t g = 0; g < cat.groups.size(); ++g)
      for (size_t p = 0; p < cat.groups[g].params.size(); ++p)
        params_by_name_.emplace(cat.groups[g].params[p].name,
                                ParamRef{static_cast<int>(g), static_cast<int>(p), -1});
    findings_ = catalog_findings(cat);
  }
  ++generation_;
}

void Session::reset_analysis() {
  analysis_ = Analysis{};
  analysis_error_.reset();
  for (auto& [name, ref] : params_by_name_) ref.report_index = -1;
  rows_without_group_.clear();
  findings_ = checkpoint_ ? catalog_findings(checkpoint_->catalog()) : std::vector<analysis::Finding>{};
  ++generation_;
}

void Session::close() {
  queue_.supersede(kSourceLanes);
  open_job_.reset();
  analysis_job_.reset();
  checkpoint_.reset();
  source_.reset();
  storage_.reset();
  path_.clear();
  lp_source_.reset();
  params_by_name_.clear();
  reset_analysis();
  series_.clear();
  samples_.clear();
  notify(Event::Closed, nullptr, nullptr);
}

JobPtr Session::analyse(Done<Analysis> done) {
  if (storage_ && source_) return analyse_source(done);
  if (!checkpoint_) return nullptr;
  auto ckpt = checkpoint_;
  analysis::DiagnoseOptions o;
  o.device = settings_.device;
  o.threads = settings_.threads;
  o.verify_checksums = settings_.verify_checksums;
  o.lp_source = lp_source_;
  reset_analysis();
  auto job = queue_.submit<Analysis>(
      JobKind::Analyse, "analyse", "Analysing " + ckpt->catalog().tag,
      [ckpt, o](JobQueue::Context& c) {
        analysis::Report r = deepspeed::diagnose(*ckpt, o, &c.progress());
        repair::settle_fixes(*ckpt, r.findings);  // Fix only where the planner would run it
        auto report = std::make_shared<const analysis::Report>(std::move(r));
        c.check();
        c.progress().set_stage("preparing the pictures", 0);
        return prepare_analysis(std::move(report), ckpt->catalog());
      },
      [this, ckpt, done = std::move(done)](Outcome<Analysis>& o) {
        deliver_analysis(ckpt == checkpoint_ && o.job == analysis_job_, o, done);
      });
  analysis_job_ = job;
  notify(Event::AnalysisStarted, job, nullptr);
  return job;
}

// A self-reporting source's diagnosis: the findings `ckptdoc diagnose` reports, as the report's.
JobPtr Session::analyse_source(const Done<Analysis>& done) {
  auto source = source_;
  auto storage = storage_;
  const std::string path = path_;
  reset_analysis();
  const bool verify = settings_.verify_checksums;
  auto job = queue_.submit<Analysis>(
      JobKind::Analyse, "analyse", "Analysing " + path,
      [source, storage, path, verify](JobQueue::Context& c) {
        c.progress().set_stage("diagnosing " + std::string(source->description()), 0);
        const auto start = std::chrono::steady_clock::now();
        auto d = source->diagnosis_for({.path = path, .verify_checksums = verify, .progress = &c.progress()});
        if (!d) throw source->refusal(path, sources::Command::Diagnose);
        c.check();
        analysis::Report r;
        r.findings = d->findings;
        // What the views' status lines say: the source's own diagnosis read every item in the files on disk.
        r.backend = std::string(source->name()) + " source's diagnosis";
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (const auto& f : storage->files)
          if (f.present)
            for (const auto& item : f.items)  // a cut file holds less than its items claim
              r.bytes_scanned += std::min(item.offset + item.length, f.size) - std::min(item.offset, f.size);
        Analysis a;
        a.report = std::make_shared<const analysis::Report>(std::move(r));
        a.diagnosis = std::make_shared<const sources::SourceDiagnosis>(std::move(*d));
        return a;
      },
      [this, storage, done](Outcome<Analysis>& o) {
        deliver_analysis(storage == storage_ && o.job == analysis_job_, o, done);
      });
  analysis_job_ = job;
  notify(Event::AnalysisStarted, job, nullptr);
  return job;
}

void Session::deliver_analysis(bool current, Outcome<Analysis>& o, const Done<Analysis>& done) {
  if (current && o.ok()) {
    apply_analysis(*o.value);
    notify(Event::AnalysisFinished, o.job, nullptr);
  } else if (current && !o.superseded()) {
    if (o.error->kind == ErrorKind::Cancelled) {
      notify(Event::AnalysisCancelled, o.job, &*o.error);
    } else {
      analysis_error_ = *o.error;
      notify(Event::AnalysisFailed, o.job, &*o.error);
    }
  }
  if (done) done(o);
}

void Session::apply_analysis(Analysis analysis) {
  analysis_ = std::move(analysis);
  findings_ = analysis_.report->findings;
  rows_without_group_.clear();
  for (size_t i = 0; i < analysis_.report->params.size(); ++i)
    if (auto it = params_by_name_.find(analysis_.report->params[i].name); it != params_by_name_.end())
      it->second.report_index = static_cast<int>(i);
    else
      rows_without_group_.emplace(analysis_.report->params[i].name, i);
  ++generation_;
}

void Session::cancel_analysis() {
  if (analysis_job_ && !analysis_job_->finished()) analysis_job_->cancel();
}

std::optional<ParamRef> Session::find_param(const std::string& name) const {
  auto it = params_by_name_.find(name);
  if (it == params_by_name_.end()) return std::nullopt;
  return it->second;
}

const analysis::ParamReport* Session::param_report(const std::string& name) const {
  if (!analysis_.report) return nullptr;
  if (const auto ref = find_param(name))
    return ref->report_index < 0 ? nullptr
                                 : &analysis_.report->params[static_cast<size_t>(ref->report_index)];
  const auto row = rows_without_group_.find(name);
  return row == rows_without_group_.end() ? nullptr : &analysis_.report->params[row->second];
}

std::string Session::worst_param() const {
  if (!analysis_.report || analysis_.by_severity.empty()) return {};
  return analysis_.report->params[static_cast<size_t>(analysis_.by_severity.front())].name;
}

Raster Session::layout_raster(const LayoutRasterRequest& request) const {
  const auto* cat = catalog();
  if (!cat || request.group < 0 || static_cast<size_t>(request.group) >= cat->groups.size()) {
    Raster r;
    r.width = std::max(0, request.width);
    r.height = std::max(0, request.height);
    r.rgba.assign(static_cast<size_t>(r.width) * static_cast<size_t>(r.height) * 4, 0);
    return r;
  }
  return session::layout_raster(cat->groups[static_cast<size_t>(request.group)], health(), request);
}

std::vector<StripColumn> Session::param_strip(StripLane lane, int width) const {
  if (!catalog()) return std::vector<StripColumn>(static_cast<size_t>(std::max(0, width)));
  return session::param_strip(*catalog(), health(), lane, width);
}

std::string Session::describe_fragment(int group, const LayoutHit& hit) const {
  const auto* cat = catalog();
  if (!cat || group < 0 || static_cast<size_t>(group) >= cat->groups.size()) return {};
  return session::describe_fragment(cat->groups[static_cast<size_t>(group)], health(), hit);
}

std::string Session::describe_param(int group, int param) const {
  return catalog() ? session::describe_param(*catalog(), health(), group, param) : std::string();
}

repair::RepairRequest Session::repair_request_for(analysis::RepairKind kind, const model::Catalog& catalog,
                                                  DeviceKind device) {
  repair::RepairRequest r = repair::request_for(kind, catalog);
  r.device = device;
  return r;
}

namespace {
fs::path folder_of(const std::string& path) {
  fs::path in = fs::absolute(path).lexically_normal();
  if (!in.has_filename()) in = in.parent_path();
  return in;
}
fs::path input_folder(const model::Catalog& catalog) {
  return folder_of(catalog.save_dir.empty() ? catalog.tag_dir : catalog.save_dir);
}
}  // namespace

namespace {
// "<input><suffix>" beside the input, then -2, -3, ... when taken: an output never lands on an existing
// folder.
std::string free_beside(const fs::path& in, const char* suffix) {
  const std::string base = (in.parent_path() / (in.filename().string() + suffix)).string();
  std::string candidate = base;
  std::error_code ec;
  for (int n = 2; fs::exists(candidate, ec) && n < 1000; ++n) candidate = base + "-" + std::to_string(n);
  return candidate;
}
}  // namespace

std::string Session::default_repair_output(const model::Catalog& catalog) {
  return free_beside(input_folder(catalog), "-fixed");
}

std::string Session::default_universal_output(const model::Catalog& catalog) {
  return free_beside(input_folder(catalog), "-universal");
}

std::string Session::default_source_repair_output() const {
  return free_beside(folder_of(path_), "-fixed");
}

std::string Session::default_source_export_path(bool torch) const {
  const fs::path in = folder_of(path_);
  return (in.parent_path() / (in.filename().string() + (torch ? "-weights.bin" : "-weights.safetensors")))
      .string();
}

std::string Session::default_export_path(const model::Catalog& catalog, deepspeed::ExportFormat format) {
  const fs::path in = input_folder(catalog);
  const char* ext = format == deepspeed::ExportFormat::Safetensors ? "safetensors"
                    : format == deepspeed::ExportFormat::Torch     ? "bin"
                                                                   : "h5";
  return (in.parent_path() / (in.filename().string() + "-weights." + ext)).string();
}

}  // namespace ckptdoc::session
