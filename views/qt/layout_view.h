#pragma once
// The partition layout tab: a group selector, a fit button and a one-line description above the LayoutMap.
#include <QWidget>

class QComboBox;
class QLabel;

namespace ckptdoc::gui {

class LayoutMap;
class Session;

class LayoutView : public QWidget {
  Q_OBJECT
 public:
  LayoutView(Session* session, QWidget* parent = nullptr);
  LayoutMap* map() const { return map_; }
  // Selects a param by name: switches to its group and highlights it on every rank.
  void selectParam(const QString& name);
  void setGroupIndex(int group);

 signals:
  void paramSelected(const QString& name);

 private:
  void reload();
  void showGroup(int index);

  Session* session_;
  QComboBox* groups_;
  QLabel* info_;
  LayoutMap* map_;
};

}  // namespace ckptdoc::gui
