#pragma once
// A chart view with the habits every plot here shares: antialiasing, a placeholder when empty, and a
// context menu (and exportTo) saving the chart as PNG or SVG.
#include <QChartView>

namespace ckptdoc::gui {

class ChartPanel : public QChartView {
  Q_OBJECT
 public:
  explicit ChartPanel(QWidget* parent = nullptr);
  // Replaces the chart (the panel takes ownership).
  void setChartOwned(QChart* chart);
  // Writes the chart to `path`: .svg as vector graphics, anything else as a raster image. False on failure.
  bool exportTo(const QString& path);

 protected:
  void contextMenuEvent(QContextMenuEvent* e) override;
};

}  // namespace ckptdoc::gui
