#include "storage_map_widget.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include "session.h"

namespace ckptdoc::gui {

namespace {
QColor rgba(uint32_t c) {
  return {static_cast<int>(c >> 24), static_cast<int>((c >> 16) & 0xFF), static_cast<int>((c >> 8) & 0xFF),
          static_cast<int>(c & 0xFF)};
}
}  // namespace

StorageMapWidget::StorageMapWidget(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  setObjectName(QStringLiteral("storageMap"));
  setMouseTracking(true);
  connect(session_, &Session::opened, this, &StorageMapWidget::rebuild);
  connect(session_, &Session::closed, this, &StorageMapWidget::rebuild);
  connect(session_, &Session::analysisFinished, this, &StorageMapWidget::rebuild);
  rebuild();
}

void StorageMapWidget::rebuild() {
  const auto* map = session_->core().storage_map();
  picture_ = map ? session::storage_picture(*map, session_->core().findings()) : session::StoragePicture{};
  updateGeometry();
  update();
}

QSize StorageMapWidget::sizeHint() const {
  return {800, 2 * kMargin + kRowHeight * std::max<int>(1, static_cast<int>(picture_.rows.size()))};
}

QRectF StorageMapWidget::boxRect(int row, const session::StorageBox& b) const {
  const double w = std::max(1, width() - kLabelWidth - 2 * kMargin);
  const double x0 = kLabelWidth + kMargin + b.x0 * w;
  const double x1 = kLabelWidth + kMargin + b.x1 * w;
  return {x0, static_cast<double>(kMargin + row * kRowHeight + 3), std::max(1.0, x1 - x0),
          static_cast<double>(kRowHeight - 6)};
}

void StorageMapWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (picture_.rows.empty()) {
    p.drawText(rect(), Qt::AlignCenter,
               tr("The storage map shows the files of a PyTorch DCP, Accelerate FSDP "
                  "or Megatron-core checkpoint."));
    return;
  }
  const double w = std::max(1, width() - kLabelWidth - 2 * kMargin);
  for (int r = 0; r < static_cast<int>(picture_.rows.size()); ++r) {
    const auto& row = picture_.rows[static_cast<size_t>(r)];
    const int y = kMargin + r * kRowHeight;
    const QRect label(kMargin, y, kLabelWidth - 2 * kMargin, kRowHeight);
    p.setPen(row.present ? palette().text().color() : QColor(0xC6, 0x28, 0x28));
    p.drawText(label, Qt::AlignVCenter | Qt::AlignRight, QString::fromStdString(row.label));
    const QRectF extent(kLabelWidth + kMargin, y + 3, std::max(1.0, row.extent * w), kRowHeight - 6);
    if (!row.present) {
      p.fillRect(extent, QBrush(QColor(0xC6, 0x28, 0x28, 90), Qt::BDiagPattern));
    } else {
      p.fillRect(extent, QColor(0xEE, 0xEE, 0xEE));
    }
    for (const auto& b : row.boxes) {
      QColor c = rgba(b.rgba);
      if (!row.present) c.setAlpha(60);
      p.fillRect(boxRect(r, b), c);
    }
    if (!row.findings.empty()) {
      p.setPen(QPen(QColor(0xC6, 0x28, 0x28), 2));
      p.drawRect(extent.adjusted(-1, -1, 1, 1));
    }
  }
}

std::pair<int, int> StorageMapWidget::hit(QPoint pt) const {
  const int r = (pt.y() - kMargin) / kRowHeight;
  if (pt.y() < kMargin || r < 0 || r >= static_cast<int>(picture_.rows.size())) return {-1, -1};
  for (const auto& b : picture_.rows[static_cast<size_t>(r)].boxes)
    if (boxRect(r, b).adjusted(-1, 0, 1, 0).contains(pt)) return {r, static_cast<int>(b.item)};
  return {r, -1};
}

bool StorageMapWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const auto [file, item] = hit(help->pos());
    const auto* map = session_->core().storage_map();
    QString text;
    if (map && file >= 0 && item >= 0)
      text = QString::fromStdString(
          session::describe_stored_item(*map, static_cast<size_t>(file), static_cast<size_t>(item)));
    else if (map && file >= 0) {
      const auto& row = picture_.rows[static_cast<size_t>(file)];
      text = QString::fromStdString(row.label) + (row.present ? QString() : tr("\nnot on disk"));
      for (const auto& code : row.findings) text += QStringLiteral("\n") + QString::fromStdString(code);
    }
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(e);
}

void StorageMapWidget::mousePressEvent(QMouseEvent* e) {
  const auto [file, item] = hit(e->position().toPoint());
  const auto* map = session_->core().storage_map();
  if (!map || file < 0 || item < 0) return;
  emit keyClicked(
      QString::fromStdString(map->files[static_cast<size_t>(file)].items[static_cast<size_t>(item)].key));
}

}  // namespace ckptdoc::gui
