#include "repair_actions.h"

#include <QCheckBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

namespace ckptdoc::gui {

RepairActions::RepairActions(int dpWorldSize, QWidget* parent) : QGroupBox(tr("Actions"), parent) {
  setObjectName(QStringLiteral("repairActions"));
  auto* v = new QVBoxLayout(this);
  auto box = [&](const QString& text, const char* name) {
    auto* b = new QCheckBox(text, this);
    b->setObjectName(QString::fromLatin1(name));
    v->addWidget(b);
    connect(b, &QCheckBox::toggled, this, [this] {
      syncEnabled();
      emit changed();
    });
    return b;
  };
  refresh_ = box(tr("Refresh fp32 masters from the 16-bit weights (--refresh-fp32)"), "repairRefreshFp32");
  reset_ =
      box(tr("Reset optimizer state: empty moments, step 0 (--reset-optimizer)"), "repairResetOptimizer");
  drop_ =
      box(tr("Drop optimizer state: a weights-only checkpoint (--drop-optimizer)"), "repairDropOptimizer");
  restore_ =
      box(tr("Restore missing ZeRO-3 model files as copies of one that is there (--restore-model-files)"),
          "repairRestoreModelFiles");
  repartition_ = box(tr("Re-partition (--repartition)"), "repairRepartition");

  auto* form = new QFormLayout;
  form->setContentsMargins(24, 0, 0, 0);
  worldSize_ = new QSpinBox(this);
  worldSize_->setObjectName(QStringLiteral("repairWorldSize"));
  worldSize_->setRange(1, 65536);
  worldSize_->setValue(std::max(1, dpWorldSize));
  form->addRow(tr("New data-parallel size:"), worldSize_);
  template_ = new QLineEdit(this);
  template_->setObjectName(QStringLiteral("repairTemplate"));
  template_->setPlaceholderText(tr("or: a checkpoint whose layout to take (--target)"));
  form->addRow(tr("Template checkpoint:"), template_);
  v->addLayout(form);
  connect(worldSize_, &QSpinBox::valueChanged, this, &RepairActions::changed);
  connect(template_, &QLineEdit::textChanged, this, [this] {
    syncEnabled();
    emit changed();
  });
  syncEnabled();
}

void RepairActions::syncEnabled() {
  const bool on = repartition_->isChecked();
  template_->setEnabled(on);
  worldSize_->setEnabled(on && template_->text().trimmed().isEmpty());
}

void RepairActions::preset(const repair::RepairRequest& r) {
  const QSignalBlocker block(this);
  refresh_->setChecked(r.refresh_fp32);
  reset_->setChecked(r.reset_optimizer);
  drop_->setChecked(r.drop_optimizer);
  restore_->setChecked(r.restore_model_files);
  repartition_->setChecked(r.world_size || r.target);
  if (r.world_size) worldSize_->setValue(*r.world_size);
  template_->setText(r.target ? QString::fromStdString(*r.target) : QString());
  syncEnabled();
}

void RepairActions::fill(repair::RepairRequest& r) const {
  r.refresh_fp32 = refresh_->isChecked();
  r.reset_optimizer = reset_->isChecked();
  r.drop_optimizer = drop_->isChecked();
  r.restore_model_files = restore_->isChecked();
  r.world_size.reset();
  r.target.reset();
  if (!repartition_->isChecked()) return;
  const QString t = template_->text().trimmed();
  if (t.isEmpty())
    r.world_size = worldSize_->value();
  else
    r.target = t.toStdString();
}

void RepairActions::setTemplate(const QString& path) {
  if (!path.trimmed().isEmpty()) repartition_->setChecked(true);
  template_->setText(path);
}

bool RepairActions::anyChosen() const {
  return refresh_->isChecked() || reset_->isChecked() || drop_->isChecked() || restore_->isChecked() ||
         repartition_->isChecked();
}

}  // namespace ckptdoc::gui
