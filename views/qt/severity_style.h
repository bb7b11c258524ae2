#pragma once
// The colours and words every view uses for a finding's severity, so the overview, the table and the log
// agree.
#include <QColor>
#include <QString>

#include "ckptdoc/analysis/report.h"

namespace ckptdoc::gui {

QColor severityColor(analysis::Severity s);       // strong colour: badges, borders
QColor severityBackground(analysis::Severity s);  // light tint: row backgrounds
QString severityLabel(analysis::Severity s);      // "Error", "Warning", "Info"
QString repairLabel(analysis::RepairKind r);      // button text, e.g. "Fix: refresh fp32 masters"

}  // namespace ckptdoc::gui
