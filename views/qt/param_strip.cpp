#include "param_strip.h"

#include <QHelpEvent>
#include <QImage>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include "layout_map.h"
#include "session.h"

namespace ckptdoc::gui {

namespace {
constexpr session::StripLane kLanes[] = {session::StripLane::Divergence, session::StripLane::Moments,
                                         session::StripLane::NonFinite};
}

ParamStrip::ParamStrip(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  setObjectName(QStringLiteral("paramStrip"));
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  connect(session_, &Session::opened, this, [this] { update(); });
  connect(session_, &Session::closed, this, [this] { update(); });
  connect(session_, &Session::analysisStarted, this, [this] { update(); });
  connect(session_, &Session::analysisFinished, this, [this] { update(); });
}

void ParamStrip::setSelectedParam(const QString& name) {
  selected_ = name;
  update();
}

QString ParamStrip::paramAt(int x) const {
  const auto* cat = session_->catalog();
  if (!cat || x < kLabelWidth) return {};
  const auto cols = session_->core().param_strip(session::StripLane::Divergence, stripWidth());
  const int c = x - kLabelWidth;
  if (c < 0 || c >= static_cast<int>(cols.size()) || cols[static_cast<size_t>(c)].param < 0) return {};
  const auto& col = cols[static_cast<size_t>(c)];
  return QString::fromStdString(
      cat->groups[static_cast<size_t>(col.group)].params[static_cast<size_t>(col.param)].name);
}

QColor ParamStrip::colourAt(int lane, int x) const {
  const auto cols = session_->core().param_strip(kLanes[std::clamp(lane, 0, 2)], stripWidth());
  const int c = x - kLabelWidth;
  if (c < 0 || c >= static_cast<int>(cols.size())) return {};
  return rgbaColor(cols[static_cast<size_t>(c)].rgba);
}

void ParamStrip::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().window());
  const auto* cat = session_->catalog();
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  p.setFont(f);
  const int w = stripWidth();
  for (int i = 0; i < 3; ++i) {
    const int y = kTop + i * (kLaneHeight + kGap);
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QRect(4, y, kLabelWidth - 8, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft,
               QString::fromUtf8(session::strip_lane_label(kLanes[i]).data()));
    if (!cat) continue;
    const auto cols = session_->core().param_strip(kLanes[i], w);
    QImage lane(w, 1, QImage::Format_RGBA8888);
    for (int x = 0; x < w; ++x) {
      const uint32_t c = cols[static_cast<size_t>(x)].rgba;
      lane.setPixelColor(x, 0, c ? rgbaColor(c) : palette().color(QPalette::Base));
    }
    p.drawImage(QRect(kLabelWidth, y, w, kLaneHeight), lane);
  }
  if (!cat) return;
  // The selected param: a marker over its columns.
  const auto where = session_->core().find_param(selected_.toStdString());
  if (!where) return;
  const auto order = session::strip_order(*cat);
  for (size_t k = 0; k < order.size(); ++k) {
    if (order[k] != std::pair{where->group, where->param}) continue;
    const double per = static_cast<double>(w) / static_cast<double>(order.size());
    const double x0 = kLabelWidth + k * per, x1 = std::max(x0 + 2, kLabelWidth + (k + 1) * per);
    p.setPen(QPen(palette().color(QPalette::Text), 1.5));
    p.setBrush(Qt::NoBrush);
    p.drawRect(QRectF(x0, kTop - 1, x1 - x0, 3 * (kLaneHeight + kGap) - kGap + 2));
    break;
  }
}

void ParamStrip::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  const QString name = paramAt(static_cast<int>(e->position().x()));
  if (name.isEmpty()) return;
  setSelectedParam(name);
  emit paramClicked(name);
}

bool ParamStrip::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const QString name = paramAt(he->pos().x());
    const auto where = session_->core().find_param(name.toStdString());
    if (where) {
      const QStringList lines =
          QString::fromStdString(session_->core().describe_param(where->group, where->param)).split('\n');
      QString html = QStringLiteral("<b>%1</b>").arg(lines.value(0).toHtmlEscaped());
      for (int i = 1; i < lines.size(); ++i) html += QStringLiteral("<br>") + lines[i].toHtmlEscaped();
      QToolTip::showText(he->globalPos(), html, this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(e);
}

}  // namespace ckptdoc::gui
