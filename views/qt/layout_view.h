#pragma once
// The partition layout tab: the overview strip of every param, then a group selector, the shading menu
// (param, exact fraction, NaN/Inf count, moment magnitude) and a fit button, the shade's legend, then the
// LayoutMap. It opens shaded by the metric of the worst finding, by param when there is none.
#include <QWidget>

#include "ckptdoc/session/pictures.h"

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
  // Shades by `shade` and keeps it for this source (--shade, a user's choice); without it each analysis
  // shades by its worst finding's metric (session::shade_for).
  void pinShade(session::Shade shade);
  QLabel* legend() const { return legend_; }

 signals:
  void paramSelected(const QString& name);

 private:
  void reload();
  void showGroup(int index);
  void updateLegend();
  void showShade(session::Shade shade);

  Session* session_;
  ParamStrip* strip_;
  QComboBox* groups_;
  QComboBox* shade_;
  QLabel* legend_;
  QLabel* info_;
  LayoutMap* map_;
  bool shadePinned_ = false;  // pinShade: for every source
  bool shadeChosen_ = false;  // picked in the menu: for this source (or this followed run)
};

}  // namespace ckptdoc::gui
