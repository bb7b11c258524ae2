#pragma once
// The partition layout tab: the overview strip of every param, then a group selector, the shading menu
// (param, exact fraction, NaN/Inf count, moment magnitude) with its legend and a fit button above the
// LayoutMap.
#include <QWidget>

class QComboBox;
class QLabel;

namespace ckptdoc::gui {

class LayoutMap;
class ParamStrip;
class Session;

class LayoutView : public QWidget {
  Q_OBJECT
 public:
  LayoutView(Session* session, QWidget* parent = nullptr);
  LayoutMap* map() const { return map_; }
  ParamStrip* strip() const { return strip_; }
  QComboBox* shadeSelector() const { return shade_; }
  // Selects a param by name: switches to its group and highlights it on every rank.
  void selectParam(const QString& name);
  void setGroupIndex(int group);

 signals:
  void paramSelected(const QString& name);

 private:
  void reload();
  void showGroup(int index);
  void updateLegend();

  Session* session_;
  ParamStrip* strip_;
  QComboBox* groups_;
  QComboBox* shade_;
  QLabel* legend_;
  QLabel* info_;
  LayoutMap* map_;
};

}  // namespace ckptdoc::gui
