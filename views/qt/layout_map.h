#pragma once
// The partition layout map: one row per dp rank, each rank's flat partition drawn to scale, every param
// fragment a coloured block (a param has the same colour on every rank), padding hatched. Wheel zooms,
// drag pans, Shift+wheel scrolls ranks, double-click fits; a click selects a param everywhere. Only what is
// visible is drawn, and sub-pixel fragments are merged per pixel column, so 1024 ranks stay smooth.
#include <QWidget>
#include <memory>
#include <optional>

#include "ckptdoc/deepspeed/catalog.h"
#include "layout_geometry.h"

namespace ckptdoc::gui {

QColor paramColor(int param);

class LayoutMap : public QWidget {
  Q_OBJECT
 public:
  explicit LayoutMap(QWidget* parent = nullptr);

  // `owner` keeps the catalog that `group` lives in alive.
  void setGroup(std::shared_ptr<const void> owner, const deepspeed::GroupLayout* group);
  const deepspeed::GroupLayout* group() const { return group_; }
  void setSelectedParam(int param);  // -1 clears
  int selectedParam() const { return selected_; }
  const LayoutGeometry& geometry() const { return geometry_; }
  LayoutGeometry& geometry() { return geometry_; }
  void fitToWidth();
  QString describe(const LayoutHit& hit) const;  // tooltip text

  QSize sizeHint() const override { return {800, 300}; }

 signals:
  void paramClicked(int param);

 protected:
  void paintEvent(QPaintEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void showEvent(QShowEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void mouseDoubleClickEvent(QMouseEvent*) override;
  bool event(QEvent*) override;

 private:
  void drawRuler(QPainter& p);
  void drawRow(QPainter& p, int rank);

  std::shared_ptr<const void> owner_;
  const deepspeed::GroupLayout* group_ = nullptr;
  LayoutGeometry geometry_;
  int selected_ = -1;
  bool autoFit_ = true;  // refit on resize until the user zooms or pans
  void adaptRowHeight();
  std::optional<QPointF> pressPos_;
  QPointF lastPos_;
  bool dragged_ = false;
};

}  // namespace ckptdoc::gui
