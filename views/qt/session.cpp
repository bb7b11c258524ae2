#include "session.h"

#include <spdlog/spdlog.h>

#include "ckptdoc/analysis/diagnose.h"

namespace ckptdoc::gui {

Session::Session(QObject* parent) : QObject(parent) {
  connect(&runner_, &JobRunner::started, this, [this](int job, const QString&) { emit analysisStarted(job); });
  connect(&runner_, &JobRunner::progressed, this, [this](int, const QString& stage, quint64 done, quint64 total) {
    emit analysisProgress(stage, total ? static_cast<double>(done) / static_cast<double>(total) : 0.0);
  });
  connect(&runner_, &JobRunner::finished, this, [this](int job) { emit analysisFinished(job); });
  connect(&runner_, &JobRunner::failed, this, [this](int job, const QString& message) {
    spdlog::error("analysis failed: {}", message.toStdString());
    emit analysisFailed(job, message);
  });
  connect(&runner_, &JobRunner::cancelled, this, [this](int job) {
    spdlog::info("analysis cancelled");
    emit analysisCancelled(job);
  });
}

bool Session::open(const QString& path, QString* error) {
  std::shared_ptr<const deepspeed::Checkpoint> ckpt;
  try {
    ckpt = deepspeed::Checkpoint::open(path.toStdString());
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    spdlog::error("cannot open {}: {}", path.toStdString(), e.what());
    return false;
  }
  runner_.invalidate();  // a running analysis of the previous checkpoint is dropped
  checkpoint_ = std::move(ckpt);
  path_ = path;
  report_.reset();
  const auto& c = checkpoint_->catalog();
  spdlog::info("opened {} (tag {}, ZeRO stage {}, dp {}, {} groups)", c.tag_dir, c.tag, c.zero_stage, c.dp_world_size,
               c.groups.size());
  emit opened();
  return true;
}

void Session::close() {
  runner_.invalidate();
  checkpoint_.reset();
  report_.reset();
  path_.clear();
  emit closed();
}

int Session::analyse() {
  if (!checkpoint_) return 0;
  report_.reset();
  auto ckpt = checkpoint_;
  const DeviceKind device = device_;
  const bool checksums = verifyChecksums_;
  spdlog::info("analysing {} on {}{}", ckpt->catalog().tag_dir, device_name(device),
               checksums ? ", verifying checksums" : "");
  return runner_.run<analysis::Report>(
      QStringLiteral("Analysing"),
      [ckpt, device, checksums](Progress& p) {
        analysis::DiagnoseOptions o;
        o.device = device;
        o.verify_checksums = checksums;
        return analysis::diagnose(*ckpt, o, &p);
      },
      [this](analysis::Report& r) {
        spdlog::info("analysis done: {} findings, {} params, {:.2f} s on {}", r.findings.size(), r.params.size(),
                     r.seconds, r.backend);
        report_ = std::move(r);
      });
}

void Session::cancelAnalysis() { runner_.cancel(); }

}  // namespace ckptdoc::gui
