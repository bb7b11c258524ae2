#pragma once
// The partition layout map: one row per dp rank, each rank's flat partition drawn to scale, every fragment
// (param slice) shaded by its param or by its health (exact fraction, NaN/Inf count, moment magnitude: core's
// session::layout_raster, the same pixels the ImGui view draws), padding hatched. Rows shrink below a pixel
// so 1024 ranks fit and one stale rank still shows. With a job queue (the session's) the picture is made on a
// worker, and until it lands the last one is drawn where its pixels now belong, so panning never waits. Wheel
// zooms, drag pans, Shift+wheel scrolls ranks, Ctrl+wheel zooms rows, double-click fits; a click selects a
// param.
#include <QImage>
#include <QWidget>
#include <memory>
#include <optional>

#include "ckptdoc/model/flat_layout.h"
#include "ckptdoc/session/job_queue.h"
#include "ckptdoc/session/pictures.h"
#include "layout_geometry.h"

namespace ckptdoc::gui {

QColor paramColor(int param);
QColor rgbaColor(uint32_t rgba);  // core's 0xRRGGBBAA

class LayoutMap : public QWidget {
  Q_OBJECT
 public:
  explicit LayoutMap(QWidget* parent = nullptr);

  // `owner` keeps the catalog that `group` lives in alive.
  void setGroup(std::shared_ptr<const void> owner, const model::GroupLayout* group);
  const model::GroupLayout* group() const { return group_; }
  // Measures for the health shades (null before an analysis: fragments then show their param colour).
  void setHealth(std::shared_ptr<const session::HealthMap> health);
  void setShade(session::Shade shade);
  // Make pictures as jobs on `queue` (lane "layout-raster"); null: in paintEvent (tests, small layouts).
  void setJobQueue(session::JobQueue* queue) { queue_ = queue; }
  // Whether the drawn picture shows the view as it is now (no picture job pending).
  bool pictureCurrent() const { return !rasterKey_.isEmpty() && rasterKey_ == currentKey(); }
  session::Shade shade() const { return shade_; }
  void setSelectedParam(int param);  // -1 clears
  int selectedParam() const { return selected_; }
  const LayoutGeometry& geometry() const { return geometry_; }
  LayoutGeometry& geometry() { return geometry_; }
  void fitToWidth();                             // the whole partition and every rank in view
  QString describe(const LayoutHit& hit) const;  // tooltip text

  QSize sizeHint() const override { return {800, 300}; }

 signals:
  void paramClicked(int param);
  void pictureReady();

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
  void drawLabels(QPainter& p);
  void drawSelection(QPainter& p);
  void drawNames(QPainter& p);

  std::shared_ptr<const void> owner_;
  const model::GroupLayout* group_ = nullptr;
  std::shared_ptr<const session::HealthMap> health_;
  session::Shade shade_ = session::Shade::Param;
  LayoutGeometry geometry_;
  int selected_ = -1;
  bool autoFit_ = true;  // refit on resize until the user zooms or pans
  QString currentKey() const;
  session::LayoutRasterRequest request() const;
  QImage raster_;  // the last picture, re-made only when what it shows changed
  QString rasterKey_, pendingKey_;
  LayoutGeometry rasterGeometry_;  // the geometry raster_ was made with
  session::JobQueue* queue_ = nullptr;
  std::optional<QPointF> pressPos_;
  QPointF lastPos_;
  bool dragged_ = false;
};

}  // namespace ckptdoc::gui
