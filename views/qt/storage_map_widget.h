#pragma once
// The storage map of a self-reporting source (session::storage_picture): one row per storage file, each item
// a box to scale of its bytes, coloured by key; a file not on disk is hatched red and a file a finding names
// is outlined. Hovering an item shows its key, chunk and byte range; clicking it selects its key.
#include <QWidget>

#include "ckptdoc/session/storage_picture.h"

namespace ckptdoc::gui {

class Session;

class StorageMapWidget : public QWidget {
  Q_OBJECT
 public:
  explicit StorageMapWidget(Session* session, QWidget* parent = nullptr);
  // What is drawn (tests read it): rebuilt when the source or its analysis changes.
  const session::StoragePicture& picture() const { return picture_; }
  void rebuild();
  QSize sizeHint() const override;
  static constexpr int kRowHeight = 22, kLabelWidth = 220, kMargin = 6;

 signals:
  void keyClicked(const QString& key);

 protected:
  void paintEvent(QPaintEvent* e) override;
  bool event(QEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;

 private:
  // The (file, item) under a point, or {-1, -1}.
  std::pair<int, int> hit(QPoint p) const;
  QRectF boxRect(int row, const session::StorageBox& b) const;

  Session* session_;
  session::StoragePicture picture_;
};

}  // namespace ckptdoc::gui
