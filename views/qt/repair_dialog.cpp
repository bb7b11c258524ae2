#include "repair_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <spdlog/spdlog.h>

#include "severity_style.h"

namespace ckptdoc::gui {

QString RepairDialog::defaultOutput(const deepspeed::Catalog& catalog) {
  const QFileInfo in(QString::fromStdString(catalog.save_dir.empty() ? catalog.tag_dir : catalog.save_dir));
  const QString base = in.absoluteDir().filePath(in.fileName() + QStringLiteral("-fixed"));
  QString candidate = base;
  for (int n = 2; QFileInfo::exists(candidate) && n < 1000; ++n) candidate = base + QStringLiteral("-%1").arg(n);
  return candidate;
}

RepairDialog::RepairDialog(std::shared_ptr<const deepspeed::Checkpoint> checkpoint, analysis::RepairKind kind,
                           DeviceKind device, QWidget* parent)
    : QDialog(parent), ckpt_(std::move(checkpoint)), kind_(kind) {
  setWindowTitle(tr("Repair preview — %1").arg(repairLabel(kind).mid(5)));
  setObjectName(QStringLiteral("repairDialog"));
  resize(720, 560);
  auto* v = new QVBoxLayout(this);
  auto* intro = new QLabel(tr("Nothing is written until you press <b>Repair</b>. The input stays untouched; the "
                              "repaired checkpoint goes into a new folder and is verified by diagnosing it again."),
                           this);
  intro->setWordWrap(true);
  v->addWidget(intro);

  auto* form = new QFormLayout;
  auto* outRow = new QHBoxLayout;
  output_ = new QLineEdit(defaultOutput(ckpt_->catalog()), this);
  output_->setObjectName(QStringLiteral("repairOutput"));
  auto* browse = new QPushButton(tr("Browse…"), this);
  outRow->addWidget(output_, 1);
  outRow->addWidget(browse);
  form->addRow(tr("Output folder:"), outRow);
  device_ = new QComboBox(this);
  device_->addItem(tr("Auto (CUDA when available)"), static_cast<int>(DeviceKind::Auto));
  device_->addItem(tr("CPU"), static_cast<int>(DeviceKind::Cpu));
  device_->addItem(tr("CUDA"), static_cast<int>(DeviceKind::Cuda));
  device_->setCurrentIndex(device_->findData(static_cast<int>(device)));
  form->addRow(tr("Device:"), device_);
  if (kind_ == analysis::RepairKind::Repartition) {
    worldSize_ = new QSpinBox(this);
    worldSize_->setRange(1, 65536);
    worldSize_->setValue(std::max(1, ckpt_->catalog().dp_world_size));
    form->addRow(tr("New data-parallel size:"), worldSize_);
    connect(worldSize_, &QSpinBox::valueChanged, this, &RepairDialog::updatePlan);
  }
  v->addLayout(form);

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

  auto* prow = new QHBoxLayout;
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  progress_->setTextVisible(false);
  stage_ = new QLabel(this);
  prow->addWidget(stage_);
  prow->addWidget(progress_, 1);
  v->addLayout(prow);
  progress_->hide();
  resultLabel_ = new QLabel(this);
  resultLabel_->setObjectName(QStringLiteral("repairResult"));
  resultLabel_->setWordWrap(true);
  resultLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  resultLabel_->hide();
  v->addWidget(resultLabel_);

  auto* buttons = new QDialogButtonBox(this);
  run_ = buttons->addButton(tr("Repair"), QDialogButtonBox::AcceptRole);
  run_->setObjectName(QStringLiteral("runRepairButton"));
  run_->setDefault(true);
  openOutput_ = buttons->addButton(tr("Open repaired checkpoint"), QDialogButtonBox::ActionRole);
  openOutput_->setObjectName(QStringLiteral("openRepairedButton"));
  openOutput_->hide();
  cancel_ = buttons->addButton(tr("Close"), QDialogButtonBox::RejectRole);
  v->addWidget(buttons);

  connect(browse, &QPushButton::clicked, this, [this] {
    const QString dir = QFileDialog::getSaveFileName(this, tr("Output folder (must not exist)"), output_->text());
    if (!dir.isEmpty()) output_->setText(dir);
  });
  connect(output_, &QLineEdit::textChanged, this, &RepairDialog::updatePlan);
  connect(device_, &QComboBox::currentIndexChanged, this, &RepairDialog::updatePlan);
  connect(run_, &QPushButton::clicked, this, &RepairDialog::startRepair);
  connect(cancel_, &QPushButton::clicked, this, [this] {
    if (jobs_.running()) {
      jobs_.cancel();
      stage_->setText(tr("Cancelling…"));
    } else {
      reject();
    }
  });
  connect(openOutput_, &QPushButton::clicked, this, [this] {
    emit openRequested(output());
    accept();
  });
  connect(&jobs_, &JobRunner::progressed, this, [this](int, const QString& stage, quint64 done, quint64 total) {
    stage_->setText(stage);
    progress_->setValue(total ? static_cast<int>(1000.0 * static_cast<double>(done) / static_cast<double>(total)) : 0);
  });
  connect(&jobs_, &JobRunner::failed, this, [this](int, const QString& m) {
    progress_->hide();
    stage_->clear();
    // run_repair fails only while the output is not in place: the output folder is as it was.
    resultLabel_->setText(tr("<b style='color:#c62828'>Repair failed.</b> %1<br>Nothing was written.").arg(m.toHtmlEscaped()));
    resultLabel_->show();
    run_->setEnabled(true);
    cancel_->setText(tr("Close"));
    spdlog::error("repair failed: {}", m.toStdString());
    emit repairFinished(false);
  });
  connect(&jobs_, &JobRunner::cancelled, this, [this] {
    // Only a cancel while writing ends here (run_repair threw Cancelled and removed its partial folder); a cancel
    // during the verification returns a result that says the output is written but unverified.
    progress_->hide();
    stage_->setText(tr("Cancelled; nothing was written."));
    run_->setEnabled(true);
    cancel_->setText(tr("Close"));
    spdlog::info("repair cancelled");
  });
  updatePlan();
}

repair::RepairRequest RepairDialog::request() const {
  repair::RepairRequest r;
  switch (kind_) {
    case analysis::RepairKind::RefreshFp32: r.refresh_fp32 = true; break;
    case analysis::RepairKind::ResetOptimizer: r.reset_optimizer = true; break;
    case analysis::RepairKind::DropOptimizer: r.drop_optimizer = true; break;
    case analysis::RepairKind::Repartition:
      r.world_size = worldSize_ ? worldSize_->value() : ckpt_->catalog().dp_world_size;
      break;
    case analysis::RepairKind::None: break;
  }
  r.device = static_cast<DeviceKind>(device_->currentData().toInt());
  return r;
}

QString RepairDialog::output() const { return output_->text().trimmed(); }
void RepairDialog::setOutput(const QString& path) { output_->setText(path); }
QString RepairDialog::planText() const { return plan_->toPlainText(); }

void RepairDialog::updatePlan() {
  try {
    const auto plan = repair::make_plan(*ckpt_, output().toStdString(), request());
    plan_->setPlainText(QString::fromStdString(plan.text()));
    planError_->hide();
    planValid_ = true;
  } catch (const std::exception& e) {
    plan_->clear();
    planError_->setText(tr("This repair cannot run: %1").arg(QString::fromStdString(e.what())));
    planError_->show();
    planValid_ = false;
  }
  run_->setEnabled(planValid_ && !jobs_.running());
}

void RepairDialog::startRepair() {
  if (!planValid_ || jobs_.running()) return;
  run_->setEnabled(false);
  cancel_->setText(tr("Cancel"));
  progress_->setValue(0);
  progress_->show();
  resultLabel_->hide();
  result_.reset();
  const auto ckpt = ckpt_;
  const std::string out = output().toStdString();
  const auto req = request();
  spdlog::info("repairing {} into {}", ckpt->catalog().tag_dir, out);
  jobs_.run<repair::RepairResult>(
      tr("Repairing"), [ckpt, out, req](Progress& p) { return repair::run_repair(*ckpt, out, req, &p); },
      [this](repair::RepairResult& r) {
        result_ = std::move(r);
        showResult();
      },
      /*keep_result_on_cancel=*/true);
}

void RepairDialog::showResult() {
  progress_->hide();
  stage_->clear();
  cancel_->setText(tr("Close"));
  const auto& r = *result_;
  QString html;
  if (r.state == repair::OutputState::VerificationIncomplete) {
    html = tr("<b style='color:#e65100'>⚠ Written, but not verified.</b> %1. The repaired checkpoint is complete and in "
              "place, but it has not been checked: open it to diagnose it before you use it, or delete it.<br><code>%2</code>")
               .arg(QString::fromStdString(r.verification_cancelled ? std::string("The verification was cancelled")
                                                                     : "The verification did not finish: " +
                                                                           r.verification_error)
                        .toHtmlEscaped(),
                    QString::fromStdString(r.output).toHtmlEscaped());
    resultLabel_->setText(html);
    resultLabel_->show();
    openOutput_->show();
    spdlog::warn("repair written to {} but not verified: {}", r.output, r.verification_error);
    emit repairFinished(false);
    return;
  }
  if (r.ok())
    html = tr("<b style='color:#2e7d32'>✔ Repaired and verified.</b> The output diagnoses clean and DeepSpeed's "
              "loader invariants hold.<br><code>%1</code>")
               .arg(QString::fromStdString(r.output).toHtmlEscaped());
  else
    html = tr("<b style='color:#c62828'>✘ Written, but verification found problems.</b><br><code>%1</code>")
               .arg(QString::fromStdString(r.output).toHtmlEscaped());
  for (const auto& f : r.verification.findings)
    html += QStringLiteral("<br><span style='color:%1'>%2</span> %3: %4")
                .arg(severityColor(f.severity).name(), severityLabel(f.severity), QString::fromStdString(f.code),
                     QString::fromStdString(f.message).toHtmlEscaped());
  for (const auto& inv : r.invariant_failures)
    html += QStringLiteral("<br><span style='color:#c62828'>invariant</span> %1").arg(QString::fromStdString(inv).toHtmlEscaped());
  resultLabel_->setText(html);
  resultLabel_->show();
  openOutput_->show();
  spdlog::info("repair written to {}: verified_clean={}, {} invariant failures", r.output, r.verified_clean,
               r.invariant_failures.size());
  emit repairFinished(r.ok());
}

}  // namespace ckptdoc::gui
