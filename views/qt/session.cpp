#include "session.h"

#include <spdlog/spdlog.h>

#include <QMetaObject>
#include <algorithm>

namespace ckptdoc::gui {

QString errorText(const session::JobError& e) {
  QString m = QString::fromStdString(e.message);
  switch (e.kind) {
    case session::ErrorKind::Input:
    case session::ErrorKind::Cancelled:
    case session::ErrorKind::Superseded:
      return m;
    case session::ErrorKind::System:
      return QObject::tr("system error: %1").arg(m);
    case session::ErrorKind::Internal:
      break;
  }
  return QObject::tr("internal error: %1").arg(m);
}

Session::Session(QObject* parent) : QObject(parent) {
  // Workers only post; poll() runs here, on the UI thread.
  core_.set_wake([this] {
    QMetaObject::invokeMethod(
        this, [this] { core_.poll(); }, Qt::QueuedConnection);
  });
  core_.listen([this](session::Event e, const session::JobPtr& job, const session::JobError* error) {
    onEvent(e, job, error);
  });
  timer_.setInterval(50);
  connect(&timer_, &QTimer::timeout, this, &Session::tick);
}

Session::~Session() {
  timer_.stop();
  core_.queue().shutdown();  // before QObject teardown: no wake-up may reach a half-destroyed object
}

session::JobPtr Session::open(const QString& path) {
  openingPath_ = path;
  auto job = core_.open(path.toStdString());
  timer_.start();
  return job;
}

void Session::close() {
  core_.close();
}

void Session::attach(const QString& dir) {
  attachedDir_ = dir;
  spdlog::info("attaching to {}", dir.toStdString());
  session::JobPtr job;
  job = core_.watch(
      session::folder_feed(dir.toStdString()),
      [this, dir](session::Outcome<size_t>& o) {
        if (o.job == watchJob_) watchJob_.reset();
        QString why;
        if (!o.ok() && !o.superseded() && o.error->kind != session::ErrorKind::Cancelled)
          why = errorText(*o.error);
        if (!why.isEmpty()) spdlog::error("attach to {} ended: {}", dir.toStdString(), why.toStdString());
        emit attachEnded(dir, why);
      },
      true);
  watchJob_ = job;
  emit attached(dir);
}

void Session::detach() {
  if (watchJob_) watchJob_->cancel();
}

int Session::analyse() {
  auto job = core_.analyse();
  if (job) timer_.start();
  return job ? static_cast<int>(job->id()) : 0;
}

session::JobPtr Session::diff(const QString& other, const analysis::DiffOptions& options,
                              session::Done<analysis::DiffResult> done) {
  auto job = core_.diff(other.toStdString(), options, std::move(done));
  timer_.start();
  return job;
}

void Session::onEvent(session::Event e, const session::JobPtr& job, const session::JobError* error) {
  const int id = job ? static_cast<int>(job->id()) : 0;
  switch (e) {
    case session::Event::Opening:
      emit opening(openingPath_);
      break;
    case session::Event::Opened: {
      if (const model::Catalog* c = core_.catalog())
        spdlog::info("opened {} (tag {}, {}, dp {}, {} groups)", c->tag_dir, c->tag,
                     c->partitioning_text.empty() ? c->description : c->partitioning_text, c->dp_world_size,
                     c->groups.size());
      else if (const auto* m = core_.storage_map())
        spdlog::info("opened {} ({}, {} files, {} keys)", m->path, m->format, m->files.size(),
                     m->keys.size());
      emit opened();
      break;
    }
    case session::Event::OpenFailed:
      spdlog::error("cannot open {}: {}", openingPath_.toStdString(), error ? error->message : "?");
      emit openFailed(openingPath_, error ? errorText(*error) : QString());
      break;
    case session::Event::Closed:
      emit closed();
      break;
    case session::Event::AnalysisStarted:
      spdlog::info("analysing {} on {}{}", core_.catalog() ? core_.catalog()->tag_dir : "",
                   device_name(device()), verifyChecksums() ? ", verifying checksums" : "");
      timer_.start();
      emit analysisStarted(id);
      break;
    case session::Event::AnalysisFinished: {
      const auto* r = core_.report();
      spdlog::info("analysis done: {} findings, {} params, {:.2f} s on {}", r->findings.size(),
                   r->params.size(), r->seconds, r->backend);
      emit analysisFinished(id);
      break;
    }
    case session::Event::AnalysisFailed:
      spdlog::error("analysis failed: {}", error ? error->message : "?");
      emit analysisFailed(id, error ? errorText(*error) : QString());
      break;
    case session::Event::AnalysisCancelled:
      spdlog::info("analysis cancelled");
      emit analysisCancelled(id);
      break;
    case session::Event::WatchSample:
      emit watchSampled();
      break;
    case session::Event::WatchRemoved: {
      const QString p = error ? QString::fromStdString(error->file) : QString();
      const bool shown = !p.isEmpty() && p == path();
      spdlog::warn("{}{}", error ? error->message : "a snapshot was deleted",
                   shown ? " (the one shown: its last analysis stays on screen)" : "");
      emit snapshotRemoved(p, shown);
      break;
    }
    case session::Event::WatchSkipped:
      spdlog::warn("cannot read a snapshot: {}", error ? error->message : "?");
      emit snapshotUnreadable(error ? QString::fromStdString(error->file) : QString(),
                              error ? errorText(*error) : QString());
      break;
  }
}

void Session::tick() {
  if (auto a = core_.analysis_job(); a && !a->finished())
    emit analysisProgress(QString::fromStdString(a->stage()), a->fraction());
  emit jobsProgressed();
  // A watch waits for the run's next snapshot indefinitely: it does not keep this timer going.
  const auto jobs = core_.queue().jobs();
  if (std::all_of(jobs.begin(), jobs.end(),
                  [](const session::JobPtr& j) { return j->kind() == session::JobKind::Watch; }))
    timer_.stop();
}

}  // namespace ckptdoc::gui
