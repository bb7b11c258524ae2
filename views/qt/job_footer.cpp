#include "job_footer.h"

#include <QDialogButtonBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

namespace ckptdoc::gui {

JobFooter::JobFooter(const QString& runText, const QString& openText, const Names& names, QWidget* parent)
    : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(0, 0, 0, 0);
  auto* prow = new QHBoxLayout;
  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  progress_->setTextVisible(false);
  stage_ = new QLabel(this);
  prow->addWidget(stage_);
  prow->addWidget(progress_, 1);
  v->addLayout(prow);
  progress_->hide();
  result_ = new QLabel(this);
  result_->setObjectName(names.result);
  result_->setWordWrap(true);
  result_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  result_->hide();
  v->addWidget(result_);

  auto* buttons = new QDialogButtonBox(this);
  run_ = buttons->addButton(runText, QDialogButtonBox::AcceptRole);
  run_->setObjectName(names.run);
  run_->setDefault(true);
  open_ = buttons->addButton(openText, QDialogButtonBox::ActionRole);
  open_->setObjectName(names.open);
  open_->hide();
  close_ = buttons->addButton(tr("Close"), QDialogButtonBox::RejectRole);
  v->addWidget(buttons);
}

void JobFooter::started() {
  run_->setEnabled(false);
  close_->setText(tr("Cancel"));
  progress_->setValue(0);
  progress_->show();
  result_->hide();
  open_->hide();
}

void JobFooter::progressed(const std::string& stage, double fraction) {
  stage_->setText(QString::fromStdString(stage));
  progress_->setValue(static_cast<int>(1000.0 * fraction));
}

void JobFooter::setStage(const QString& text) {
  stage_->setText(text);
}

void JobFooter::ended() {
  progress_->hide();
  stage_->clear();
  close_->setText(tr("Close"));
}

void JobFooter::showResult(const QString& html, bool openable) {
  result_->setText(html);
  result_->show();
  open_->setVisible(openable);
}

}  // namespace ckptdoc::gui
