#include "repair_dialog.h"

#include <spdlog/spdlog.h>

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QVBoxLayout>

#include "ckptdoc/repair/fix_offer.h"
#include "job_footer.h"
#include "repair_actions.h"
#include "session.h"
#include "severity_style.h"

namespace ckptdoc::gui {

QString RepairDialog::defaultOutput(const model::Catalog& catalog) {
  return QString::fromStdString(session::Session::default_repair_output(catalog));
}

RepairDialog::RepairDialog(Session* session, analysis::RepairKind kind, QWidget* parent)
    : QDialog(parent), session_(session) {
  setWindowTitle(kind == analysis::RepairKind::None
                     ? tr("Repair")
                     : tr("Repair preview — %1").arg(repairLabel(kind).mid(5)));
  setObjectName(QStringLiteral("repairDialog"));
  resize(720, 560);
  const model::Catalog& catalog = *session_->catalog();
  auto* v = new QVBoxLayout(this);
  auto* intro =
      new QLabel(tr("Nothing is written until you press <b>Repair</b>. The input stays untouched; the "
                    "repaired checkpoint goes into a new folder and is verified by diagnosing it again."),
                 this);
  intro->setWordWrap(true);
  v->addWidget(intro);

  auto* form = new QFormLayout;
  auto* outRow = new QHBoxLayout;
  output_ = new QLineEdit(defaultOutput(catalog), this);
  output_->setObjectName(QStringLiteral("repairOutput"));
  auto* browse = new QPushButton(tr("Browse…"), this);
  outRow->addWidget(output_, 1);
  outRow->addWidget(browse);
  form->addRow(tr("Output folder:"), outRow);
  device_ = new QComboBox(this);
  device_->addItem(tr("Auto (CUDA when available)"), static_cast<int>(DeviceKind::Auto));
  device_->addItem(tr("CPU"), static_cast<int>(DeviceKind::Cpu));
  device_->addItem(tr("CUDA"), static_cast<int>(DeviceKind::Cuda));
  device_->setCurrentIndex(device_->findData(static_cast<int>(session_->device())));
  form->addRow(tr("Device:"), device_);
  v->addLayout(form);
  actions_ = new RepairActions(catalog.dp_world_size, this);
  if (kind != analysis::RepairKind::None) actions_->preset(repair::request_for(kind, catalog));
  connect(actions_, &RepairActions::changed, this, &RepairDialog::updatePlan);
  v->addWidget(actions_);

  v->addWidget(new QLabel(tr("<b>Plan</b>"), this));
  plan_ = new QPlainTextEdit(this);
  plan_->setObjectName(QStringLiteral("repairPlan"));
  plan_->setReadOnly(true);
  plan_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  v->addWidget(plan_, 1);
  planError_ = new QLabel(this);
  planError_->setStyleSheet(QStringLiteral("color: #c62828;"));
  planError_->setWordWrap(true);
  planError_->hide();
  v->addWidget(planError_);

  footer_ = new JobFooter(tr("Repair"), tr("Open repaired checkpoint"),
                          {QStringLiteral("runRepairButton"), QStringLiteral("openRepairedButton"),
                           QStringLiteral("repairResult")},
                          this);
  v->addWidget(footer_);
  run_ = footer_->runButton();

  connect(browse, &QPushButton::clicked, this, [this] {
    const QString dir =
        QFileDialog::getSaveFileName(this, tr("Output folder (must not exist)"), output_->text());
    if (!dir.isEmpty()) output_->setText(dir);
  });
  connect(output_, &QLineEdit::textChanged, this, &RepairDialog::updatePlan);
  connect(device_, &QComboBox::currentIndexChanged, this, &RepairDialog::updatePlan);
  connect(run_, &QPushButton::clicked, this, &RepairDialog::startRepair);
  connect(footer_->closeButton(), &QPushButton::clicked, this, [this] {
    if (runJob_ && !runJob_->finished()) {
      runJob_->cancel();
      footer_->setStage(tr("Cancelling…"));
    } else {
      reject();
    }
  });
  connect(footer_->openButton(), &QPushButton::clicked, this, [this] {
    emit openRequested(output());
    accept();
  });
  connect(session_, &Session::jobsProgressed, this, &RepairDialog::showProgress);
  updatePlan();
}

repair::RepairRequest RepairDialog::request() const {
  repair::RepairRequest r;
  r.device = static_cast<DeviceKind>(device_->currentData().toInt());
  actions_->fill(r);
  return r;
}

QString RepairDialog::output() const {
  return output_->text().trimmed();
}
void RepairDialog::setOutput(const QString& path) {
  output_->setText(path);
}
QString RepairDialog::planText() const {
  return plan_->toPlainText();
}

void RepairDialog::setTemplate(const QString& path) {
  actions_->setTemplate(path);
}

// The plan is computed on a worker; a newer request supersedes the one in flight, whose answer never arrives.
void RepairDialog::presetActions(const repair::RepairRequest& r) {
  actions_->preset(r);
  updatePlan();
}

void RepairDialog::updatePlan() {
  planValid_ = false;
  run_->setEnabled(false);
  plan_->setPlainText(tr("Planning…"));
  planError_->hide();
  QPointer<RepairDialog> self(this);
  planJob_ = session_->core().plan_repair(
      output().toStdString(), request(), [self](session::Outcome<repair::Plan>& o) {
        if (!self || o.superseded() || o.job != self->planJob_) return;
        if (o.ok()) {
          // Said before anything is written, as the CLI's plan does: errors this choice leaves, and what
          // clears them.
          if (const analysis::Report* in = self->session_->report())
            for (auto& line : repair::errors_left_by(*in, self->request())) o.value->warnings.push_back(line);
          self->plan_->setPlainText(QString::fromStdString(o.value->text()));
          self->planValid_ = true;
        } else {
          self->plan_->clear();
          self->planError_->setText(tr("This repair cannot run: %1").arg(errorText(*o.error)));
          self->planError_->show();
        }
        self->run_->setEnabled(self->planValid_ && !(self->runJob_ && !self->runJob_->finished()));
        emit self->planReady(self->planValid_);
      });
}

void RepairDialog::startRepair() {
  if (!planValid_ || (runJob_ && !runJob_->finished())) return;
  footer_->started();
  result_.reset();
  const std::string out = output().toStdString();
  spdlog::info("repairing {} into {}", session_->catalog()->tag_dir, out);
  QPointer<RepairDialog> self(this);
  runJob_ = session_->core().run_repair(out, request(), [self](session::Outcome<repair::RepairResult>& o) {
    if (!self) return;
    self->footer_->ended();
    if (o.ok()) {
      self->result_ = std::move(*o.value);
      self->showResult();
      return;
    }
    self->run_->setEnabled(self->planValid_);
    if (o.error->kind == session::ErrorKind::Cancelled) {
      self->footer_->setStage(QString::fromStdString(session::cancelled_text(session::JobKind::Repair)));
      spdlog::info("repair cancelled");
      return;
    }
    const QString m = errorText(*o.error);
    self->footer_->showResult(
        tr("<b style='color:#c62828'>Repair failed.</b> %1<br>Nothing was written.").arg(m.toHtmlEscaped()),
        false);
    spdlog::error("repair failed: {}", m.toStdString());
    emit self->repairFinished(false);
  });
  session_->followProgress(runJob_);
}

void RepairDialog::showProgress() {
  if (!runJob_ || runJob_->finished()) return;
  footer_->progressed(runJob_->stage(), runJob_->fraction());
}

void RepairDialog::showResult() {
  footer_->ended();
  const auto& r = *result_;
  QString html;
  if (r.state == repair::OutputState::VerificationIncomplete) {
    html = tr("<b style='color:#e65100'>⚠ Written, but not verified.</b> %1. The repaired checkpoint is "
              "complete and in "
              "place, but it has not been checked: open it to diagnose it before you use it, or delete "
              "it.<br><code>%2</code>")
               .arg(QString::fromStdString(r.verification_cancelled
                                               ? std::string("The verification was cancelled")
                                               : "The verification did not finish: " + r.verification_error)
                        .toHtmlEscaped(),
                    QString::fromStdString(r.output).toHtmlEscaped());
    footer_->showResult(html, true);
    spdlog::warn("repair written to {} but not verified: {}", r.output, r.verification_error);
    emit repairFinished(false);
    return;
  }
  if (r.ok())
    html =
        tr("<b style='color:#2e7d32'>✔ Repaired and verified.</b> The output diagnoses clean and DeepSpeed's "
           "loader invariants hold.<br><code>%1</code>")
            .arg(QString::fromStdString(r.output).toHtmlEscaped());
  else
    html = tr("<b style='color:#c62828'>✘ Written, but verification found problems.</b><br><code>%1</code>")
               .arg(QString::fromStdString(r.output).toHtmlEscaped());
  for (const auto& f : r.verification.findings)
    html += QStringLiteral("<br><span style='color:%1'>%2</span> %3: %4")
                .arg(severityColor(f.severity).name(), severityLabel(f.severity),
                     QString::fromStdString(f.code), QString::fromStdString(f.message).toHtmlEscaped());
  for (const auto& inv : r.invariant_failures)
    html += QStringLiteral("<br><span style='color:#c62828'>invariant</span> %1")
                .arg(QString::fromStdString(inv).toHtmlEscaped());
  footer_->showResult(html, true);
  spdlog::info("repair written to {}: verified_clean={}, {} invariant failures", r.output, r.verified_clean,
               r.invariant_failures.size());
  emit repairFinished(r.ok());
}

}  // namespace ckptdoc::gui
