#include "layout_map.h"

#include <QHelpEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace ckptdoc::gui {

QColor paramColor(int param) {
  // Golden-ratio hues: neighbours differ clearly, and the colour depends only on the param index.
  const double hue = std::fmod(0.13 + param * 0.6180339887, 1.0);
  return QColor::fromHsvF(static_cast<float>(hue), 0.50f, 0.90f);
}

LayoutMap::LayoutMap(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(120);
  setFocusPolicy(Qt::StrongFocus);
  setAutoFillBackground(true);
}

void LayoutMap::setGroup(std::shared_ptr<const void> owner, const deepspeed::GroupLayout* group) {
  owner_ = std::move(owner);
  group_ = group;
  geometry_.rank_count = group ? static_cast<int>(group->partitions.size()) : 0;
  geometry_.partition_numel = group ? group->partition_numel : 0;
  geometry_.scroll_y = 0;
  selected_ = -1;
  fitToWidth();
}

void LayoutMap::setSelectedParam(int param) {
  if (selected_ == param) return;
  selected_ = param;
  update();
}

void LayoutMap::fitToWidth() {
  geometry_.fit(width());
  autoFit_ = true;
  adaptRowHeight();
  update();
}

// Few ranks get tall rows (easier to hit and to label); many ranks get compact ones and scroll.
void LayoutMap::adaptRowHeight() {
  const int ranks = std::max(1, geometry_.rank_count);
  const int avail = height() - geometry_.header_height - 8;
  geometry_.row_height = std::clamp(avail / ranks - geometry_.row_gap, 14, 36);
}

void LayoutMap::resizeEvent(QResizeEvent*) {
  if (autoFit_) geometry_.fit(width());
  adaptRowHeight();
  geometry_.clamp(width(), height());
}

void LayoutMap::showEvent(QShowEvent*) {
  if (autoFit_) fitToWidth();
}

QString LayoutMap::describe(const LayoutHit& hit) const {
  if (!group_) return {};
  const auto& part = group_->partitions[static_cast<size_t>(hit.rank)];
  if (hit.fragment < 0)
    return tr("<b>padding</b><br>dp rank %1, element %2 of %3<br>%4 padding elements on this rank")
        .arg(part.rank)
        .arg(hit.element)
        .arg(group_->partition_numel)
        .arg(part.padding);
  const auto& fr = part.fragments[static_cast<size_t>(hit.fragment)];
  const auto& pe = group_->params[static_cast<size_t>(fr.param)];
  QStringList dims;
  for (auto d : pe.shape) dims << QString::number(d);
  // Rows are partitions; an MoE expert group's partitions sit in every ep-th dp rank.
  return tr("<b>%1</b> [%2]<br>dp rank %3, group %4<br>partition offset %5, numel %6<br>param elements %7 – %8 of %9")
      .arg(QString::fromStdString(pe.name).toHtmlEscaped(), dims.join(QStringLiteral("×")))
      .arg(part.rank)
      .arg(group_->index)
      .arg(fr.partition_offset)
      .arg(fr.numel)
      .arg(fr.param_offset)
      .arg(fr.param_offset + fr.numel)
      .arg(pe.numel);
}

void LayoutMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (!group_ || group_->partitions.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter, tr("No partition layout (open a ZeRO checkpoint)"));
    return;
  }
  const auto [first, last] = geometry_.visibleRanks(height());
  p.save();
  p.setClipRect(QRect(0, geometry_.header_height, width(), height() - geometry_.header_height));
  for (int r = first; r < last; ++r) drawRow(p, r);
  p.restore();
  drawRuler(p);
}

void LayoutMap::drawRuler(QPainter& p) {
  const auto& g = geometry_;
  p.fillRect(QRect(0, 0, width(), g.header_height), palette().window());
  p.setPen(palette().color(QPalette::Mid));
  p.drawLine(0, g.header_height - 1, width(), g.header_height - 1);
  // Tick every 1, 2 or 5 × 10^k elements so labels sit ~100 px apart.
  const double target = 100 * g.elements_per_pixel;
  const double mag = std::pow(10.0, std::floor(std::log10(std::max(target, 1e-9))));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= target) {
      step = m * mag;
      break;
    }
  step = std::max(step, 1.0);
  const double e0 = std::max(0.0, std::floor(g.elementAt(g.label_width) / step) * step);
  const double eEnd = std::min<double>(static_cast<double>(g.partition_numel), g.elementAt(width()));
  p.setPen(palette().color(QPalette::Text));
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  p.setFont(f);
  for (double e = e0; e <= eEnd + 0.5; e += step) {
    const double x = g.xOf(e);
    if (x < g.label_width) continue;
    p.drawLine(QPointF(x, g.header_height - 6), QPointF(x, g.header_height - 1));
    p.drawText(QPointF(x + 3, g.header_height - 8), QLocale().toString(static_cast<qlonglong>(e)));
  }
  p.drawText(QRect(4, 0, g.label_width - 8, g.header_height), Qt::AlignVCenter | Qt::AlignLeft, tr("element"));
}

void LayoutMap::drawRow(QPainter& p, int rank) {
  const auto& g = geometry_;
  const auto& part = group_->partitions[static_cast<size_t>(rank)];
  const double top = g.rowTop(rank);
  const double h = g.row_height;
  const int w = width();
  // Label.
  p.setPen(palette().color(QPalette::Text));
  p.drawText(QRectF(6, top, g.label_width - 10, h), Qt::AlignVCenter | Qt::AlignLeft,
             tr("rank %1").arg(part.rank));
  // The whole partition as padding (hatched); fragments paint over it.
  const double x0 = std::max<double>(g.label_width, g.xOf(0));
  const double x1 = std::min<double>(w, g.xOf(static_cast<double>(group_->partition_numel)));
  if (x1 <= x0) return;
  p.fillRect(QRectF(x0, top, x1 - x0, h), QColor(0xf2, 0xf2, 0xf2));
  p.fillRect(QRectF(x0, top, x1 - x0, h), QBrush(QColor(0xb0, 0xb0, 0xb0), Qt::BDiagPattern));

  const double eFirst = g.elementAt(g.label_width);
  const double eLast = g.elementAt(w);
  size_t i = firstFragmentEndingAfter(part, static_cast<int64_t>(std::max(0.0, std::floor(eFirst))));
  double lastPixel = -1;  // right edge of the last drawn block, whole pixels
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  p.setFont(small);
  const QFontMetrics fm(small);
  for (; i < part.fragments.size(); ++i) {
    const auto& fr = part.fragments[i];
    if (static_cast<double>(fr.partition_offset) > eLast) break;
    double fx0 = std::max<double>(g.label_width, g.xOf(static_cast<double>(fr.partition_offset)));
    double fx1 = std::min<double>(w, g.xOf(static_cast<double>(fr.partition_offset + fr.numel)));
    // Merge sub-pixel fragments: at most one block per pixel column.
    if (std::floor(fx1) <= lastPixel) continue;
    fx0 = std::max(fx0, lastPixel);
    if (fx1 - fx0 < 1) fx1 = fx0 + 1;
    lastPixel = std::floor(fx1);
    QColor c = paramColor(fr.param);
    if (selected_ >= 0 && fr.param != selected_) {  // fade the others but keep them opaque over the hatching
      float h, sat, v;
      c.getHsvF(&h, &sat, &v);
      c = QColor::fromHsvF(h, sat * 0.35f, std::min(1.0f, v * 1.05f));
    }
    const QRectF r(fx0, top, fx1 - fx0, h);
    p.fillRect(r, c);
    if (r.width() >= 3) {
      p.setPen(QColor(255, 255, 255, 200));
      p.drawLine(r.topRight(), r.bottomRight());
    }
    if (fr.param == selected_) {
      p.setPen(QPen(QColor(0x20, 0x20, 0x20), 2));
      p.drawRect(r.adjusted(1, 1, -1, -1));
    }
    if (r.width() > 48) {
      const auto& name = group_->params[static_cast<size_t>(fr.param)].name;
      p.setPen(QColor(0x10, 0x10, 0x10));
      p.drawText(r.adjusted(4, 0, -3, 0), Qt::AlignVCenter | Qt::AlignLeft,
                 fm.elidedText(QString::fromStdString(name), Qt::ElideMiddle, static_cast<int>(r.width() - 7)));
    }
  }
  p.setFont(font());
}

void LayoutMap::wheelEvent(QWheelEvent* e) {
  const double steps = e->angleDelta().y() / 120.0;
  if (e->modifiers() & Qt::ShiftModifier) {
    geometry_.scroll_y -= steps * (geometry_.row_height + geometry_.row_gap) * 3;
  } else {
    geometry_.zoomAt(e->position().x(), std::pow(1.25, steps));
    autoFit_ = false;
  }
  geometry_.clamp(width(), height());
  update();
  e->accept();
}

void LayoutMap::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  pressPos_ = e->position();
  lastPos_ = e->position();
  dragged_ = false;
}

void LayoutMap::mouseMoveEvent(QMouseEvent* e) {
  if (pressPos_) {
    const QPointF d = e->position() - lastPos_;
    if ((e->position() - *pressPos_).manhattanLength() > 4) dragged_ = true;
    if (dragged_) {
      geometry_.first_element -= d.x() * geometry_.elements_per_pixel;
      autoFit_ = false;
      geometry_.scroll_y -= d.y();
      geometry_.clamp(width(), height());
      setCursor(Qt::ClosedHandCursor);
      update();
    }
    lastPos_ = e->position();
  }
}

void LayoutMap::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  if (!dragged_ && group_) {
    const auto hit = hitTest(*group_, geometry_, e->position());
    const int param = hit ? hit->param : -1;
    setSelectedParam(param);
    emit paramClicked(param);
  }
  pressPos_.reset();
  dragged_ = false;
  unsetCursor();
}

void LayoutMap::mouseDoubleClickEvent(QMouseEvent*) { fitToWidth(); }

bool LayoutMap::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && group_) {
    auto* he = static_cast<QHelpEvent*>(e);
    if (const auto hit = hitTest(*group_, geometry_, he->pos())) {
      QToolTip::showText(he->globalPos(), describe(*hit), this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(e);
}

}  // namespace ckptdoc::gui
