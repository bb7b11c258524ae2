#include "export_dialog.h"

#include <spdlog/spdlog.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "ckptdoc/analysis/export_gate.h"
#include "ckptdoc/sources/deepspeed/export_options.h"
#include "ckptdoc/sources/deepspeed/export_warning.h"
#include "ckptdoc/sources/source.h"
#include "ckptdoc/weights/shards.h"
#include "session.h"

namespace ckptdoc::gui {

ExportDialog::ExportDialog(Session* session, QWidget* parent)
    : QDialog(parent), session_(session), storage_(!session->sharedCatalog()) {
  setWindowTitle(tr("Export weights"));
  setObjectName(QStringLiteral("exportDialog"));
  resize(560, 260);
  auto* v = new QVBoxLayout(this);
  auto* form = new QFormLayout;
  format_ = new QComboBox(this);
  format_->addItem(QStringLiteral("safetensors"), QStringLiteral("safetensors"));
  const sources::Source* source = session_->core().storage_source();
  if (!storage_ || (source && source->exports_torch()))
    format_->addItem(QStringLiteral("torch (.bin)"), QStringLiteral("torch"));
  if (!storage_) format_->addItem(QStringLiteral("HDF5 (.h5)"), QStringLiteral("hdf5"));
  source_ = new QComboBox(this);
  source_->addItem(tr("fp32 masters (as zero_to_fp32.py)"), QStringLiteral("fp32"));
  source_->addItem(tr("lp weights (module state dict)"), QStringLiteral("lp"));
  dtype_ = new QComboBox(this);
  dtype_->addItem(tr("default (fp32 for masters, weight dtype for lp)"), QString());
  dtype_->addItem(QStringLiteral("float32"), QStringLiteral("float32"));
  dtype_->addItem(QStringLiteral("float16"), QStringLiteral("float16"));
  dtype_->addItem(QStringLiteral("bfloat16"), QStringLiteral("bfloat16"));
  excludeFrozen_ = new QCheckBox(tr("Leave out frozen params"), this);
  auto* pathRow = new QHBoxLayout;
  path_ = new QLineEdit(this);
  auto* browse = new QPushButton(tr("Browse…"), this);
  pathRow->addWidget(path_, 1);
  pathRow->addWidget(browse);
  form->addRow(tr("Format:"), format_);
  if (storage_) {
    // What the source's export writes is fixed (its weights as stored); the choices below are the catalog's.
    for (QWidget* w : std::initializer_list<QWidget*>{source_, dtype_, excludeFrozen_}) w->hide();
    shardSize_ = new QLineEdit(this);
    shardSize_->setObjectName(QStringLiteral("shardSize"));
    shardSize_->setPlaceholderText(tr("one file; or a size such as 5GB for shards in a folder"));
    form->addRow(tr("Shards:"), shardSize_);
    form->addRow(tr("File:"), pathRow);
    v->addLayout(form);
  } else {
    form->addRow(tr("Source:"), source_);
    // Stale masters (the diagnosis says so) are not what a user wants exported: the lp weights are chosen and
    // the reason shown; choosing the masters back asks once more before exporting.
    if (const analysis::Report* report = session_->report()) stale_ = analysis::stale_masters_reason(*report);
    if (stale_) {
      source_->setCurrentIndex(1);
      auto* why = new QLabel(tr("lp weights chosen: %1.").arg(QString::fromStdString(*stale_)), this);
      why->setObjectName(QStringLiteral("staleMastersNote"));
      why->setWordWrap(true);
      why->setStyleSheet(QStringLiteral("color: #b26a00"));
      form->addRow(QString(), why);
    }
    form->addRow(tr("DType:"), dtype_);
    form->addRow(QString(), excludeFrozen_);
    form->addRow(tr("File:"), pathRow);
    v->addLayout(form);
  }
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  progress_->hide();
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  v->addWidget(progress_);
  v->addWidget(status_);
  v->addStretch(1);
  auto* buttons = new QDialogButtonBox(this);
  run_ = buttons->addButton(tr("Export"), QDialogButtonBox::AcceptRole);
  close_ = buttons->addButton(tr("Close"), QDialogButtonBox::RejectRole);
  v->addWidget(buttons);

  connect(format_, &QComboBox::currentIndexChanged, this, &ExportDialog::suggestPath);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString p = QFileDialog::getSaveFileName(this, tr("Export to"), path_->text());
    if (!p.isEmpty()) path_->setText(p);
  });
  connect(run_, &QPushButton::clicked, this, &ExportDialog::start);
  connect(close_, &QPushButton::clicked, this, [this] {
    if (job_ && !job_->finished())
      job_->cancel();
    else
      reject();
  });
  connect(session_, &Session::jobsProgressed, this, &ExportDialog::showProgress);
  suggestPath();
}

void ExportDialog::suggestPath() {
  if (storage_) {
    path_->setText(QString::fromStdString(
        session_->core().default_source_export_path(format_->currentData().toString() == "torch")));
    return;
  }
  const auto format = deepspeed::parse_export_format(format_->currentData().toString().toStdString());
  path_->setText(QString::fromStdString(session::Session::default_export_path(*session_->catalog(), format)));
}

void ExportDialog::showProgress() {
  if (!job_ || job_->finished()) return;
  status_->setText(QString::fromStdString(job_->stage()));
  progress_->setValue(static_cast<int>(1000.0 * job_->fraction()));
}

deepspeed::ExportOptions ExportDialog::options() const {
  deepspeed::ExportOptions o;
  o.format = deepspeed::parse_export_format(format_->currentData().toString().toStdString());
  o.source = deepspeed::parse_export_source(source_->currentData().toString().toStdString());
  const QString dt = dtype_->currentData().toString();
  if (!dt.isEmpty()) o.dtype = dtype_from_name(dt.toStdString());
  o.exclude_frozen = excludeFrozen_->isChecked();
  return o;
}

QString ExportDialog::outputPath() const {
  return path_->text().trimmed();
}
void ExportDialog::setOutputPath(const QString& path) {
  path_->setText(path);
}

// The core never replaces a file unasked: the user's yes to replacing an existing file is --force. False when
// the user said no.
bool ExportDialog::confirmReplace(bool& force) {
  if (QFileInfo fi(outputPath()); fi.exists() && !fi.isDir()) {
    if (QMessageBox::question(this, tr("Replace file?"), tr("%1 exists. Replace it?").arg(outputPath())) !=
        QMessageBox::Yes)
      return false;
    force = true;
  }
  return true;
}

void ExportDialog::start() {
  if (job_ && !job_->finished()) return;
  if (storage_) return startSourceExport();
  deepspeed::ExportOptions o;
  try {
    o = options();
  } catch (const std::exception& e) {
    status_->setText(QString::fromStdString(e.what()));
    return;
  }
  o.device = session_->device();
  if (stale_ && o.source == deepspeed::ExportSource::Fp32 &&
      QMessageBox::question(
          this, tr("Export stale masters?"),
          tr("%1.\n\nExport the fp32 masters anyway?").arg(QString::fromStdString(*stale_))) !=
          QMessageBox::Yes)
    return;
  const std::string out = outputPath().toStdString();
  if (!confirmReplace(o.force)) return;
  run_->setEnabled(false);
  close_->setText(tr("Cancel"));
  progress_->setValue(0);
  progress_->show();
  spdlog::info("exporting weights to {}", out);
  QPointer<ExportDialog> self(this);
  job_ = session_->core().export_weights(out, o, [self](session::Outcome<deepspeed::ExportResult>& r) {
    if (!self) return;
    self->progress_->hide();
    self->run_->setEnabled(true);
    self->close_->setText(tr("Close"));
    if (!r.ok()) {
      self->status_->setText(r.error->kind == session::ErrorKind::Cancelled
                                 ? QString::fromStdString(session::cancelled_text(session::JobKind::Export))
                                 : tr("<b style='color:#c62828'>Export failed:</b> %1")
                                       .arg(errorText(*r.error).toHtmlEscaped()));
      return;
    }
    QString text = tr("<b style='color:#2e7d32'>Exported</b> %1 tensors (%2 bytes) to <code>%3</code>")
                       .arg(r.value->tensors)
                       .arg(r.value->bytes)
                       .arg(QString::fromStdString(r.value->path).toHtmlEscaped());
    // Written, but not weights a model can use: said as loudly as the success.
    if (const auto warning = deepspeed::non_finite_warning(*r.value); !warning.empty())
      text += tr("<br><b style='color:#e65100'>Warning:</b> %1")
                  .arg(QString::fromStdString(warning).toHtmlEscaped().replace('\n', QStringLiteral("<br>")));
    self->status_->setText(text);
    spdlog::info("exported {} tensors to {}", r.value->tensors, r.value->path);
    emit self->exported(QString::fromStdString(r.value->path));
  });
  session_->followProgress(job_);
}

// The source's own export, as `ckptdoc export FOLDER -o FILE` runs it: the text it prints is shown.
void ExportDialog::startSourceExport() {
  sources::ExportRequest request;
  request.output = outputPath().toStdString();
  request.torch = format_->currentData().toString() == QStringLiteral("torch");
  try {
    if (const QString size = shardSize_->text().trimmed(); !size.isEmpty())
      request.max_shard_size = weights::parse_shard_size(size.toStdString(), "the shard size");
  } catch (const std::exception& e) {
    status_->setText(QString::fromStdString(e.what()));
    return;
  }
  if (!confirmReplace(request.force)) return;
  run_->setEnabled(false);
  close_->setText(tr("Cancel"));
  progress_->setValue(0);  // the bytes written, as the DeepSpeed export's
  progress_->show();
  spdlog::info("exporting weights to {}", request.output);
  QPointer<ExportDialog> self(this);
  job_ = session_->core().export_source(request, [self](session::Outcome<sources::ExportOutcome>& r) {
    if (!self) return;
    self->progress_->hide();
    self->run_->setEnabled(true);
    self->close_->setText(tr("Close"));
    if (!r.ok()) {
      self->status_->setText(r.error->kind == session::ErrorKind::Cancelled
                                 ? QString::fromStdString(session::cancelled_text(session::JobKind::Export))
                                 : tr("<b style='color:#c62828'>Export failed:</b> %1")
                                       .arg(errorText(*r.error).toHtmlEscaped()));
      return;
    }
    QString text = tr("<b style='color:#2e7d32'>Exported</b> %1 tensors to <code>%2</code>")
                       .arg(r.value->tensors)
                       .arg(QString::fromStdString(r.value->path).toHtmlEscaped());
    text +=
        QStringLiteral("<br>") +
        QString::fromStdString(r.value->text).trimmed().toHtmlEscaped().replace('\n', QStringLiteral("<br>"));
    deepspeed::ExportResult said;  // the warning every export gives
    said.path = r.value->path;
    said.tensors = r.value->tensors;
    said.non_finite = r.value->non_finite;
    if (const auto warning = deepspeed::non_finite_warning(said); !warning.empty())
      text += tr("<br><b style='color:#e65100'>Warning:</b> %1")
                  .arg(QString::fromStdString(warning).toHtmlEscaped().replace('\n', QStringLiteral("<br>")));
    self->status_->setText(text);
    spdlog::info("exported {} tensors to {}", r.value->tensors, r.value->path);
    emit self->exported(QString::fromStdString(r.value->path));
  });
  session_->followProgress(job_);
}

}  // namespace ckptdoc::gui
