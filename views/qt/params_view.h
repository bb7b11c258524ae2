#pragma once
// The params tab: a sortable, filterable (substring or regular expression) table of every trainable param
// beside the plots of the selected one. Selecting a row selects the param everywhere.
#include <QWidget>

class QCheckBox;
class QLineEdit;
class QSortFilterProxyModel;
class QTableView;

namespace ckptdoc::gui {

class ParamTableModel;
class PlotsView;
class Session;

class ParamsView : public QWidget {
  Q_OBJECT
 public:
  ParamsView(Session* session, ParamTableModel* model, QWidget* parent = nullptr);
  void selectParam(const QString& name);
  void setFilter(const QString& text, bool regex);
  QTableView* table() const { return table_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  PlotsView* plots() const { return plots_; }

 signals:
  void paramSelected(const QString& name);

 private:
  void applyFilter();
  Session* session_;
  ParamTableModel* model_;
  QSortFilterProxyModel* proxy_;
  QLineEdit* filter_;
  QCheckBox* regex_;
  QTableView* table_;
  PlotsView* plots_;
};

}  // namespace ckptdoc::gui
