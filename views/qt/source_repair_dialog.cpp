#include "source_repair_dialog.h"

#include <spdlog/spdlog.h>

#include <QCheckBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPointer>
#include <QPushButton>
#include <QVBoxLayout>
#include <optional>
#include <tuple>

#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/source.h"
#include "job_footer.h"
#include "session.h"

namespace ckptdoc::gui {

SourceRepairDialog::SourceRepairDialog(Session* session, model::RepairKind kind, QWidget* parent)
    : QDialog(parent), session_(session) {
  setWindowTitle(tr("Repair"));
  setObjectName(QStringLiteral("sourceRepairDialog"));
  resize(640, 320);
  auto* v = new QVBoxLayout(this);
  auto* intro = new QLabel(tr("Nothing is written until you press <b>Repair</b>. The input stays untouched; "
                              "the repaired copy goes into a new folder, every byte the input's except what "
                              "the repair changes, and is read back to check it."),
                           this);
  intro->setWordWrap(true);
  v->addWidget(intro);
  const sources::Source* source = session_->core().repairing_source();
  // A finding's Fix whose action this source cannot take here says so first, rather than opening with
  // nothing ticked.
  if (const auto fix =
          source ? sources::finding_repair(*source, kind, session_->core().path()) : sources::FindingRepair{};
      fix.refused) {
    auto* why = new QLabel(QString::fromStdString(request_text(*fix.refused)), this);
    why->setObjectName(QStringLiteral("findingRepairRefused"));
    why->setWordWrap(true);
    v->addWidget(why);
  }
  // The labels are the ones the core's refusals name (session/request_field_labels.cpp).
  refresh_ = new QCheckBox(tr("Refresh fp32 masters"), this);
  refresh_->setToolTip(tr("The fp32 main params := the exact upcast of the bf16/fp16 weights"));
  reset_ = new QCheckBox(tr("Reset optimizer state"), this);
  reset_->setToolTip(tr("Adam's moments zeroed and its step set to 0: resumes as a fresh optimizer"));
  drop_ = new QCheckBox(tr("Drop optimizer state"), this);
  drop_->setToolTip(
      tr("The optimizer's keys left out: a weights-and-state folder to load with a fresh optimizer"));
  refresh_->setChecked(kind == model::RepairKind::RefreshFp32);
  reset_->setChecked(kind == model::RepairKind::ResetOptimizer);
  drop_->setChecked(kind == model::RepairKind::DropOptimizer);
  // An action the source refuses on this folder is left off, with its reason under it.
  for (const auto& [box, action, name] :
       {std::tuple{refresh_, sources::RepairAction::RefreshFp32, "refreshFp32Refused"},
        std::tuple{reset_, sources::RepairAction::ResetOptimizer, "resetOptimizerRefused"},
        std::tuple{drop_, sources::RepairAction::DropOptimizer, "dropOptimizerRefused"}}) {
    v->addWidget(box);
    const auto why = source ? source->repair_refusal(action, session_->core().path()) : std::nullopt;
    if (!why) continue;
    box->setChecked(false);
    box->setEnabled(false);
    auto* reason = new QLabel(QString::fromStdString(request_text(*why)), this);
    reason->setObjectName(QString::fromLatin1(name));
    reason->setWordWrap(true);
    reason->setStyleSheet(QStringLiteral("color: palette(mid); margin-left: 24px"));
    box->setToolTip(reason->text());
    v->addWidget(reason);
  }
  auto* form = new QFormLayout;
  auto* outRow = new QHBoxLayout;
  output_ = new QLineEdit(QString::fromStdString(session_->core().default_source_repair_output()), this);
  output_->setObjectName(QStringLiteral("repairOutput"));
  auto* browse = new QPushButton(tr("Browse…"), this);
  outRow->addWidget(output_, 1);
  outRow->addWidget(browse);
  form->addRow(tr("Output folder:"), outRow);
  v->addLayout(form);
  v->addStretch(1);
  footer_ = new JobFooter(tr("Repair"), tr("Open repaired checkpoint"),
                          {QStringLiteral("runRepairButton"), QStringLiteral("openRepairedButton"),
                           QStringLiteral("repairResult")},
                          this);
  v->addWidget(footer_);

  connect(browse, &QPushButton::clicked, this, [this] {
    const QString dir =
        QFileDialog::getSaveFileName(this, tr("Output folder (must not exist)"), output_->text());
    if (!dir.isEmpty()) output_->setText(dir);
  });
  connect(footer_->runButton(), &QPushButton::clicked, this, &SourceRepairDialog::start);
  connect(footer_->closeButton(), &QPushButton::clicked, this, [this] {
    if (job_ && !job_->finished()) {
      job_->cancel();  // stops between files, steps of a few MiB and records; nothing is published
      footer_->setStage(tr("Cancelling…"));
    } else {
      reject();
    }
  });
  connect(session_, &Session::jobsProgressed, this, &SourceRepairDialog::showProgress);
  connect(footer_->openButton(), &QPushButton::clicked, this, [this] {
    emit openRequested(output());
    accept();
  });
}

QString SourceRepairDialog::output() const {
  return output_->text().trimmed();
}
void SourceRepairDialog::setOutput(const QString& path) {
  output_->setText(path);
}
QPushButton* SourceRepairDialog::runButton() const {
  return footer_->runButton();
}

void SourceRepairDialog::start() {
  if (job_ && !job_->finished()) return;
  sources::RepairRequest request;
  request.output = output().toStdString();
  request.refresh_fp32 = refresh_->isChecked();
  request.reset_optimizer = reset_->isChecked();
  request.drop_optimizer = drop_->isChecked();
  footer_->started();
  footer_->setStage(tr("Writing the repaired copy…"));
  spdlog::info("repairing {} into {}", session_->core().path(), request.output);
  QPointer<SourceRepairDialog> self(this);
  job_ = session_->core().repair_source(request, [self](session::Outcome<sources::Outcome>& r) {
    if (!self) return;
    self->footer_->ended();
    if (!r.ok() && r.error->kind == session::ErrorKind::Cancelled) {
      self->result_ = QString::fromStdString(session::cancelled_text(session::JobKind::Repair));
      self->footer_->setStage(self->result_);
      spdlog::info("repair cancelled");
      emit self->repairFinished(false);
      return;
    }
    if (!r.ok()) {
      self->result_ = errorText(*r.error);
      self->footer_->showResult(
          tr("<b style='color:#c62828'>Repair failed:</b> %1").arg(self->result_.toHtmlEscaped()), false);
      emit self->repairFinished(false);
      return;
    }
    self->result_ = QString::fromStdString(r.value->text).trimmed();
    self->footer_->showResult(tr("<b style='color:#2e7d32'>Repaired.</b><br>%1")
                                  .arg(self->result_.toHtmlEscaped().replace('\n', QStringLiteral("<br>"))),
                              true);
    spdlog::info("repaired into {}", self->output().toStdString());
    emit self->repairFinished(true);
  });
  session_->followProgress(job_);
}

void SourceRepairDialog::showProgress() {
  if (!job_ || job_->finished()) return;
  footer_->progressed(job_->stage(), job_->fraction());
}

}  // namespace ckptdoc::gui
