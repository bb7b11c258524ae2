#include "layout_map.h"

#include <QHelpEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QPointer>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace ckptdoc::gui {

QColor rgbaColor(uint32_t c) {
  return QColor(static_cast<int>(c >> 24), static_cast<int>((c >> 16) & 0xFF),
                static_cast<int>((c >> 8) & 0xFF), static_cast<int>(c & 0xFF));
}

QColor paramColor(int param) {
  return rgbaColor(session::param_rgba(param));
}

LayoutMap::LayoutMap(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(120);
  setFocusPolicy(Qt::StrongFocus);
  setAutoFillBackground(true);
}

void LayoutMap::setGroup(std::shared_ptr<const void> owner, const model::GroupLayout* group) {
  owner_ = std::move(owner);
  group_ = group;
  geometry_.rank_count = group ? static_cast<int>(group->partitions.size()) : 0;
  geometry_.partition_numel = group ? group->partition_numel : 0;
  geometry_.scroll_y = 0;
  selected_ = -1;
  fitToWidth();
}

void LayoutMap::setHealth(std::shared_ptr<const session::HealthMap> health) {
  health_ = std::move(health);
  update();
}

void LayoutMap::setShade(session::Shade shade) {
  shade_ = shade;
  update();
}

void LayoutMap::setSelectedParam(int param) {
  if (selected_ == param) return;
  selected_ = param;
  update();
}

void LayoutMap::fitToWidth() {
  geometry_.fit(width());
  geometry_.fit_rows(height());
  autoFit_ = true;
  update();
}

void LayoutMap::resizeEvent(QResizeEvent*) {
  if (autoFit_) {
    geometry_.fit(width());
    geometry_.fit_rows(height());
  }
  geometry_.clamp(width(), height());
}

void LayoutMap::showEvent(QShowEvent*) {
  if (autoFit_) fitToWidth();
}

QString LayoutMap::describe(const LayoutHit& hit) const {
  if (!group_) return {};
  const QStringList lines =
      QString::fromStdString(session::describe_fragment(*group_, health_.get(), hit)).split('\n');
  if (lines.isEmpty()) return {};
  QString html = QStringLiteral("<b>%1</b>").arg(lines.first().toHtmlEscaped());
  for (int i = 1; i < lines.size(); ++i) html += QStringLiteral("<br>") + lines[i].toHtmlEscaped();
  return html;
}

void LayoutMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (!group_ || group_->partitions.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter, tr("No partition layout (open a ZeRO checkpoint)"));
    return;
  }
  const QString key = currentKey();
  if (key != rasterKey_ && key != pendingKey_) {  // hover, tooltips and other repaints reuse the picture
    const session::LayoutRasterRequest rq = request();
    auto toImage = [](const session::Raster& r) {
      return QImage(r.rgba.data(), r.width, r.height, static_cast<qsizetype>(r.width) * 4,
                    QImage::Format_RGBA8888)
          .copy();
    };
    if (!queue_) {
      raster_ = toImage(session::layout_raster(*group_, health_.get(), rq));
      rasterKey_ = key;
      rasterGeometry_ = rq.geometry;
    } else {
      pendingKey_ = key;
      QPointer<LayoutMap> self(this);
      queue_->submit<session::Raster>(
          session::JobKind::Other, "layout-raster", "Drawing the layout",
          [owner = owner_, group = group_, health = health_, rq](session::JobQueue::Context&) {
            return session::layout_raster(*group, health.get(), rq);
          },
          [self, key, rq, toImage](session::Outcome<session::Raster>& o) {
            if (!self || !o.ok() || self->pendingKey_ != key) return;
            self->raster_ = toImage(*o.value);
            self->rasterKey_ = key;
            self->rasterGeometry_ = rq.geometry;
            self->pendingKey_.clear();
            self->update();
            emit self->pictureReady();
          });
    }
  }
  if (!raster_.isNull()) {
    // Where the drawn picture's pixels belong now: elements and ranks map linearly between the geometries.
    const auto& d = rasterGeometry_;
    const auto& g = geometry_;
    auto toX = [&](double x) { return g.x_of(d.element_at(x)); };
    auto toY = [&](double y) {
      return g.header_height + (y - d.header_height + d.scroll_y) / d.pitch() * g.pitch() - g.scroll_y;
    };
    const QRectF source(d.label_width, d.header_height, raster_.width() - d.label_width,
                        raster_.height() - d.header_height);
    const QRectF target(QPointF(toX(source.left()), toY(source.top())),
                        QPointF(toX(source.right()), toY(source.bottom())));
    p.save();
    p.setClipRect(
        QRectF(g.label_width, g.header_height, width() - g.label_width, height() - g.header_height));
    p.drawImage(target, raster_, source);
    p.restore();
  }
  p.save();
  p.setClipRect(QRect(0, static_cast<int>(geometry_.header_height), width(),
                      height() - static_cast<int>(geometry_.header_height)));
  drawLabels(p);
  drawSelection(p);
  drawNames(p);
  p.restore();
  drawRuler(p);
}

session::LayoutRasterRequest LayoutMap::request() const {
  session::LayoutRasterRequest rq;
  rq.group = group_ ? group_->index : 0;
  rq.shade = shade_;
  rq.selected_param = selected_;
  rq.geometry = geometry_;
  rq.width = width();
  rq.height = height();
  const QColor bg = palette().base().color();  // an opaque picture, composed over the view's background
  rq.background = (static_cast<uint32_t>(bg.red()) << 24) | (static_cast<uint32_t>(bg.green()) << 16) |
                  (static_cast<uint32_t>(bg.blue()) << 8) | 0xFFu;
  return rq;
}

QString LayoutMap::currentKey() const {
  const auto& g = geometry_;
  return QStringLiteral("%1|%2|%3|%4|%5 %6 %7 %8 %9")
      .arg(reinterpret_cast<quintptr>(group_))
      .arg(reinterpret_cast<quintptr>(health_.get()))
      .arg(static_cast<int>(shade_))
      .arg(selected_)
      .arg(g.first_element, 0, 'g', 17)
      .arg(g.elements_per_pixel, 0, 'g', 17)
      .arg(g.scroll_y, 0, 'g', 17)
      .arg(g.row_height, 0, 'g', 17)
      .arg(QStringLiteral("%1 %2 %3 %4")
               .arg(g.row_gap)
               .arg(width())
               .arg(height())
               .arg(palette().base().color().rgba()));
}

void LayoutMap::drawRuler(QPainter& p) {
  const auto& g = geometry_;
  const int hh = static_cast<int>(g.header_height);
  p.fillRect(QRect(0, 0, width(), hh), palette().window());
  p.setPen(palette().color(QPalette::Mid));
  p.drawLine(0, hh - 1, width(), hh - 1);
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
  const double e0 = std::max(0.0, std::floor(g.element_at(g.label_width) / step) * step);
  const double eEnd = std::min<double>(static_cast<double>(g.partition_numel), g.element_at(width()));
  p.setPen(palette().color(QPalette::Text));
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  p.setFont(f);
  for (double e = e0; e <= eEnd + 0.5; e += step) {
    const double x = g.x_of(e);
    if (x < g.label_width) continue;
    p.drawLine(QPointF(x, hh - 6), QPointF(x, hh - 1));
    // Right of its tick, unless that runs past the edge ("9" for 90,000): then it ends at its tick.
    const QString label = QLocale().toString(static_cast<qlonglong>(e));
    const double w = p.fontMetrics().horizontalAdvance(label);
    p.drawText(QPointF(x + 3 + w > width() ? x - 3 - w : x + 3, hh - 8), label);
  }
  p.drawText(QRect(4, 0, static_cast<int>(g.label_width) - 8, hh), Qt::AlignVCenter | Qt::AlignLeft,
             tr("element"));
  p.setFont(font());
}

// Rank labels: every rank when rows are tall enough to read, else every k-th rank with a tick.
void LayoutMap::drawLabels(QPainter& p) {
  const auto& g = geometry_;
  const auto [first, last] = g.visible_ranks(height());
  QFont f = font();
  if (g.row_height < 14) f.setPointSizeF(f.pointSizeF() * 0.8);
  p.setFont(f);
  const int textH = QFontMetrics(f).height();
  const int every = g.pitch() >= textH ? 1 : static_cast<int>(std::ceil((textH + 2) / g.pitch()));
  p.setPen(palette().color(QPalette::Text));
  for (int r = first; r < last; ++r) {
    if (r % every) continue;
    const double top = g.row_top(r);
    if (every == 1) {
      p.drawText(QRectF(6, top, g.label_width - 10, g.row_height), Qt::AlignVCenter | Qt::AlignLeft,
                 tr("rank %1").arg(group_->partitions[static_cast<size_t>(r)].rank));
    } else {
      p.drawLine(QPointF(g.label_width - 8, top), QPointF(g.label_width - 1, top));
      p.drawText(QRectF(6, top, g.label_width - 16, textH), Qt::AlignTop | Qt::AlignLeft,
                 QString::number(group_->partitions[static_cast<size_t>(r)].rank));
    }
  }
  p.setFont(font());
}

// An outline around the selected param's fragments on every visible rank (rows of 4 px and more).
void LayoutMap::drawSelection(QPainter& p) {
  const auto& g = geometry_;
  if (selected_ < 0 || g.row_height < 4) return;
  const auto [first, last] = g.visible_ranks(height());
  p.setPen(QPen(palette().color(QPalette::Text), g.row_height >= 10 ? 2 : 1));
  p.setBrush(Qt::NoBrush);
  for (int r = first; r < last; ++r)
    for (const auto& fr : group_->partitions[static_cast<size_t>(r)].fragments) {
      if (fr.param != selected_) continue;
      const double x0 = std::max(g.label_width, g.x_of(static_cast<double>(fr.partition_offset)));
      const double x1 =
          std::min<double>(width(), g.x_of(static_cast<double>(fr.partition_offset + fr.numel)));
      if (x1 < g.label_width || x0 > width()) continue;
      p.drawRect(
          QRectF(x0, g.row_top(r), std::max(1.0, x1 - x0), g.row_height).adjusted(0.5, 0.5, -0.5, -0.5));
    }
}

// Param names inside fragments wide and tall enough to hold them.
void LayoutMap::drawNames(QPainter& p) {
  const auto& g = geometry_;
  if (g.row_height < 12) return;
  const auto [first, last] = g.visible_ranks(height());
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  p.setFont(small);
  const QFontMetrics fm(small);
  p.setPen(QColor(0x10, 0x10, 0x10));
  const double eFirst = std::max(0.0, g.element_at(g.label_width));
  const double eLast = g.element_at(width());
  for (int r = first; r < last; ++r) {
    const auto& part = group_->partitions[static_cast<size_t>(r)];
    for (size_t i = session::first_fragment_ending_after(part, static_cast<int64_t>(eFirst));
         i < part.fragments.size(); ++i) {
      const auto& fr = part.fragments[i];
      if (static_cast<double>(fr.partition_offset) > eLast) break;
      const double x0 = std::max(g.label_width, g.x_of(static_cast<double>(fr.partition_offset)));
      const double x1 =
          std::min<double>(width(), g.x_of(static_cast<double>(fr.partition_offset + fr.numel)));
      if (x1 - x0 <= 48) continue;
      const auto& name = group_->params[static_cast<size_t>(fr.param)].name;
      p.drawText(QRectF(x0 + 4, g.row_top(r), x1 - x0 - 7, g.row_height), Qt::AlignVCenter | Qt::AlignLeft,
                 fm.elidedText(QString::fromStdString(name), Qt::ElideMiddle, static_cast<int>(x1 - x0 - 7)));
    }
  }
  p.setFont(font());
}

void LayoutMap::wheelEvent(QWheelEvent* e) {
  const double steps = e->angleDelta().y() / 120.0;
  if (e->modifiers() & Qt::ShiftModifier) {
    geometry_.scroll_y -= steps * std::max(1.0, geometry_.pitch()) * 3;
  } else if (e->modifiers() & Qt::ControlModifier) {
    geometry_.zoom_rows_at(e->position().y(), std::pow(1.25, steps));
    autoFit_ = false;
  } else {
    geometry_.zoom_at(e->position().x(), std::pow(1.25, steps));
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

void LayoutMap::mouseDoubleClickEvent(QMouseEvent*) {
  fitToWidth();
}

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
