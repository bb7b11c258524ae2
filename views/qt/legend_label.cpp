#include "legend_label.h"

#include "layout_map.h"
#include "session.h"

namespace ckptdoc::gui {

QString legendHtml(const session::Legend& legend) {
  QString html = QStringLiteral("<b>%1</b>").arg(QString::fromStdString(legend.title).toHtmlEscaped());
  if (!legend.entries.empty()) html += QStringLiteral(":&nbsp;");
  for (const auto& e : legend.entries)
    html += QStringLiteral("<span style='background:%1'>&nbsp;&nbsp;&nbsp;</span>&nbsp;%2&nbsp;&nbsp;")
                .arg(rgbaColor(e.rgba).name(), QString::fromStdString(e.text).toHtmlEscaped());
  return html;
}

StripLegend::StripLegend(Session* session, QWidget* parent) : QLabel(parent), session_(session) {
  setObjectName(QStringLiteral("stripLegend"));
  setTextFormat(Qt::RichText);
  setWordWrap(true);
  setStyleSheet(QStringLiteral("font-size: 85%;"));
  connect(session_, &Session::opened, this, &StripLegend::refresh);
  connect(session_, &Session::closed, this, &StripLegend::refresh);
  connect(session_, &Session::analysisFinished, this, &StripLegend::refresh);
  refresh();
}

void StripLegend::refresh() {
  QStringList lines;
  for (auto lane :
       {session::StripLane::Divergence, session::StripLane::Moments, session::StripLane::NonFinite})
    lines << QStringLiteral("%1 — %2").arg(
        QString::fromUtf8(session::strip_lane_label(lane).data()),
        legendHtml(session::strip_lane_legend(lane, session_->core().health())));
  setText(lines.join(QStringLiteral("<br>")));
}

}  // namespace ckptdoc::gui
