#pragma once
// Findings of a report (or, before analysis, the catalog's problems) as a list model: one row per finding,
// columns severity, code, message, params, ranks, repair. The overview's cards and tests read it.
#include <QAbstractTableModel>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/model/catalog.h"

namespace ckptdoc::gui {

class FindingsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Severity, Code, Message, Params, Ranks, Repair, ColumnCount };
  enum Role { SeverityRole = Qt::UserRole + 1, RepairRole };

  explicit FindingsModel(QObject* parent = nullptr);

  void setFindings(std::vector<analysis::Finding> findings);  // e.g. session::Session::findings()
  void setReport(const analysis::Report* report);
  void setCatalogProblems(const model::Catalog* catalog);  // shown until an analysis replaces them
  void clear();
  const analysis::Finding& finding(int row) const { return findings_.at(static_cast<size_t>(row)); }
  int count() const { return static_cast<int>(findings_.size()); }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<analysis::Finding> findings_;
};

}  // namespace ckptdoc::gui
