#include "convert_dialog.h"

#include <spdlog/spdlog.h>

#include <QFileDialog>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPointer>
#include <QPushButton>
#include <QVBoxLayout>

#include "ckptdoc/error.h"
#include "ckptdoc/session/session.h"
#include "job_footer.h"
#include "session.h"
#include "severity_style.h"

namespace ckptdoc::gui {

ConvertDialog::ConvertDialog(Session* session, QWidget* parent) : QDialog(parent), session_(session) {
  setWindowTitle(tr("Convert to a universal checkpoint"));
  setObjectName(QStringLiteral("convertDialog"));
  resize(720, 480);
  const model::Catalog& catalog = *session_->catalog();
  auto* v = new QVBoxLayout(this);
  auto* intro =
      new QLabel(tr("Writes the folder DeepSpeed's ds_to_universal.py writes, so the checkpoint loads "
                    "with <code>load_universal</code> on any data-parallel size. The input stays "
                    "untouched; the output is verified by re-opening it."),
                 this);
  intro->setWordWrap(true);
  v->addWidget(intro);

  auto* form = new QFormLayout;
  auto* outRow = new QHBoxLayout;
  output_ = new QLineEdit(QString::fromStdString(session::Session::default_universal_output(catalog)), this);
  output_->setObjectName(QStringLiteral("convertOutput"));
  auto* browse = new QPushButton(tr("Browse…"), this);
  outRow->addWidget(output_, 1);
  outRow->addWidget(browse);
  form->addRow(tr("Output folder:"), outRow);
  version_ = new QLineEdit(this);
  version_->setObjectName(QStringLiteral("convertForDeepSpeed"));
  version_->setPlaceholderText(
      catalog.writer_version.empty()
          ? tr("e.g. 0.14.5")
          : tr("%1 (the checkpoint's own)").arg(QString::fromStdString(catalog.writer_version)));
  form->addRow(tr("For DeepSpeed:"), version_);
  v->addLayout(form);

  v->addWidget(new QLabel(tr("<b>Summary</b>"), this));
  summary_ = new QPlainTextEdit(this);
  summary_->setObjectName(QStringLiteral("convertSummary"));
  summary_->setReadOnly(true);
  summary_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  v->addWidget(summary_, 1);

  footer_ = new JobFooter(tr("Convert"), tr("Open converted checkpoint"),
                          {QStringLiteral("runConvertButton"), QStringLiteral("openConvertedButton"),
                           QStringLiteral("convertResult")},
                          this);
  v->addWidget(footer_);
  run_ = footer_->runButton();

  connect(browse, &QPushButton::clicked, this, [this] {
    const QString dir =
        QFileDialog::getSaveFileName(this, tr("Output folder (must not exist)"), output_->text());
    if (!dir.isEmpty()) output_->setText(dir);
  });
  connect(output_, &QLineEdit::textChanged, this, &ConvertDialog::updateSummary);
  connect(version_, &QLineEdit::textChanged, this, &ConvertDialog::updateSummary);
  connect(run_, &QPushButton::clicked, this, &ConvertDialog::startConvert);
  connect(footer_->closeButton(), &QPushButton::clicked, this, [this] {
    if (job_ && !job_->finished()) {
      job_->cancel();
      footer_->setStage(tr("Cancelling…"));
    } else {
      reject();
    }
  });
  connect(footer_->openButton(), &QPushButton::clicked, this, [this] {
    emit openRequested(QString::fromStdString(result_->output));
    accept();
  });
  connect(session_, &Session::jobsProgressed, this, &ConvertDialog::showProgress);
  updateSummary();
}

QString ConvertDialog::output() const {
  return output_->text().trimmed();
}
void ConvertDialog::setOutput(const QString& path) {
  output_->setText(path);
}
QString ConvertDialog::summaryText() const {
  return summary_->toPlainText();
}

// What the chosen DeepSpeed version's loader reads, from core; a version core refuses disables Convert.
// Whether this checkpoint can be converted at all is core's to say when it runs (nothing is written then).
void ConvertDialog::updateSummary() {
  const model::Catalog& cat = *session_->catalog();
  const std::string version =
      version_->text().trimmed().isEmpty() ? cat.writer_version : version_->text().trimmed().toStdString();
  QStringList lines;
  lines << tr("input:  %1").arg(QString::fromStdString(cat.tag_dir));
  lines << tr("output: %1 (a new save folder; latest_universal names the tag inside)").arg(output());
  canRun_ = !output().isEmpty();
  try {
    const universal::TargetVersion t = universal::target_version(version);
    lines << tr("for DeepSpeed %1: %2")
                 .arg(QString::fromStdString(t.version),
                      t.loader == universal::LoaderKind::StepFiles
                          ? tr("fp32, exp_avg, exp_avg_sq and step per param, optimizer_state.pt")
                          : tr("fp32, exp_avg, exp_avg_sq per param; the Adam step from the iteration"));
    for (const auto& c : t.caveats) lines << tr("caveat: %1").arg(QString::fromStdString(c));
  } catch (const Error& e) {
    lines << tr("This conversion cannot run: %1").arg(QString::fromStdString(e.what()));
    canRun_ = false;
  }
  summary_->setPlainText(lines.join(QLatin1Char('\n')));
  run_->setEnabled(canRun_ && !(job_ && !job_->finished()));
}

void ConvertDialog::startConvert() {
  if (!canRun_ || (job_ && !job_->finished())) return;
  footer_->started();
  result_.reset();
  universal::ToUniversalOptions o;
  o.for_deepspeed = version_->text().trimmed().toStdString();
  o.device = session_->device();
  const std::string out = output().toStdString();
  spdlog::info("converting {} to universal into {}", session_->catalog()->tag_dir, out);
  QPointer<ConvertDialog> self(this);
  job_ = session_->core().convert_to_universal(out, o, [self](session::Outcome<universal::ConvertResult>& r) {
    if (!self) return;
    self->footer_->ended();
    if (r.ok()) {
      self->result_ = std::move(*r.value);
      self->showResult();
      return;
    }
    self->run_->setEnabled(self->canRun_);
    // A cancelled conversion threw before publishing: its partial folder is gone
    // (sources/checkpoint/output_folder.cpp).
    const bool cancelled = r.error->kind == session::ErrorKind::Cancelled;
    const QString m = cancelled ? QString::fromStdString(session::cancelled_text(session::JobKind::Convert))
                                : errorText(*r.error);
    self->footer_->showResult(
        cancelled ? m.toHtmlEscaped()
                  : tr("<b style='color:#c62828'>Not converted.</b> %1<br>Nothing was written.")
                        .arg(m.toHtmlEscaped()),
        false);
    spdlog::warn("convert to universal: {}", m.toStdString());
    emit self->convertFinished(false);
  });
  session_->followProgress(job_);
}

void ConvertDialog::showProgress() {
  if (!job_ || job_->finished()) return;
  footer_->progressed(job_->stage(), job_->fraction());
}

void ConvertDialog::showResult() {
  const auto& r = *result_;
  const QString where = QString::fromStdString(r.output + "/" + r.tag).toHtmlEscaped();
  QString html =
      r.verified() ? tr("<b style='color:#2e7d32'>✔ Converted and verified:</b> %1 params in %2 files, "
                        "every tensor equal to its source.<br><code>%3</code>")
                         .arg(r.params)
                         .arg(r.files)
                         .arg(where)
                   : tr("<b style='color:#c62828'>✘ Written, but verification failed.</b><br><code>%1</code>")
                         .arg(where);
  for (const auto& a : r.assumptions)
    html += tr("<br>Assumed: %1").arg(QString::fromStdString(a).toHtmlEscaped());
  for (const auto& n : r.notes) html += tr("<br>Note: %1").arg(QString::fromStdString(n).toHtmlEscaped());
  for (const auto& f : r.verify_failures)
    html += tr("<br><span style='color:#c62828'>check failed</span> %1")
                .arg(QString::fromStdString(f).toHtmlEscaped());
  for (const auto& f : r.verification.findings)
    if (f.severity == analysis::Severity::Error)
      html += QStringLiteral("<br><span style='color:%1'>%2</span> %3: %4")
                  .arg(severityColor(f.severity).name(), severityLabel(f.severity),
                       QString::fromStdString(f.code), QString::fromStdString(f.message).toHtmlEscaped());
  footer_->showResult(html, true);
  spdlog::info("converted to universal into {}: verified={}", r.output, r.verified());
  emit convertFinished(r.verified());
}

}  // namespace ckptdoc::gui
