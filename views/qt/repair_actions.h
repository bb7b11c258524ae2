#pragma once
// The repair actions a user picks (refresh fp32, reset or drop the optimizer, re-partition to N ranks or onto
// a template) as check boxes; the repair dialog asks the planner about every combination, so nothing here
// judges which ones can run together.
#include <QGroupBox>

#include "ckptdoc/repair/plan.h"

class QCheckBox;
class QLineEdit;
class QSpinBox;

namespace ckptdoc::gui {

class RepairActions : public QGroupBox {
  Q_OBJECT
 public:
  // dpWorldSize: the checkpoint's own data-parallel size, the default for a re-partition.
  RepairActions(int dpWorldSize, QWidget* parent = nullptr);

  // Checks the boxes of the actions `r` asks for (world size, template) without emitting changed().
  void preset(const repair::RepairRequest& r);
  // Writes the chosen actions into `r`, leaving its other fields (device, output options) alone.
  void fill(repair::RepairRequest& r) const;
  // Re-partition onto another checkpoint's layout (--target); empty clears it.
  void setTemplate(const QString& path);
  bool anyChosen() const;

 signals:
  void changed();

 private:
  void syncEnabled();

  QCheckBox* refresh_;
  QCheckBox* reset_;
  QCheckBox* drop_;
  QCheckBox* restore_;
  QCheckBox* repartition_;
  QSpinBox* worldSize_;
  QLineEdit* template_;
};

}  // namespace ckptdoc::gui
