#include "severity_style.h"

namespace ckptdoc::gui {

QColor severityColor(analysis::Severity s) {
  switch (s) {
    case analysis::Severity::Error:
      return QColor(0xc6, 0x28, 0x28);
    case analysis::Severity::Warning:
      return QColor(0xe0, 0x8a, 0x00);
    case analysis::Severity::Info:
      break;
  }
  return QColor(0x1e, 0x72, 0xc8);
}

QColor severityBackground(analysis::Severity s) {
  switch (s) {
    case analysis::Severity::Error:
      return QColor(0xfd, 0xec, 0xec);
    case analysis::Severity::Warning:
      return QColor(0xff, 0xf6, 0xe0);
    case analysis::Severity::Info:
      break;
  }
  return QColor(0xea, 0xf3, 0xfc);
}

QString severityLabel(analysis::Severity s) {
  switch (s) {
    case analysis::Severity::Error:
      return QStringLiteral("Error");
    case analysis::Severity::Warning:
      return QStringLiteral("Warning");
    case analysis::Severity::Info:
      break;
  }
  return QStringLiteral("Info");
}

QString repairLabel(analysis::RepairKind r) {
  switch (r) {
    case analysis::RepairKind::RefreshFp32:
      return QStringLiteral("Fix: refresh fp32 masters");
    case analysis::RepairKind::ResetOptimizer:
      return QStringLiteral("Fix: reset optimizer state");
    case analysis::RepairKind::DropOptimizer:
      return QStringLiteral("Fix: drop optimizer state");
    case analysis::RepairKind::Repartition:
      return QStringLiteral("Fix: repartition");
    case analysis::RepairKind::RestoreModelFiles:
      return QStringLiteral("Fix: restore model files");
    case analysis::RepairKind::None:
      break;
  }
  return QString();
}

}  // namespace ckptdoc::gui
