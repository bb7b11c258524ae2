#pragma once
// Every trainable param as a table row: name, group, shape, dtype, numel, lp-vs-fp32 divergence (max |Δ|,
// rel L2, exact fraction), moment statistics and NaN/Inf counts. Before analysis only the catalog columns
// are filled. SortRole gives numbers so a QSortFilterProxyModel sorts numerically.
#include <QAbstractTableModel>
#include <memory>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/model/catalog.h"

namespace ckptdoc::gui {

class ParamTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Name,
    Group,
    Shape,
    DTypeCol,
    Numel,
    MaxAbsDiff,
    RelL2,
    ExactFraction,
    Fp32Rms,
    ExpAvgRms,
    ExpAvgSqMean,
    NaNs,
    Infs,
    Score,
    ColumnCount
  };
  static constexpr int SortRole = Qt::UserRole + 1;
  static constexpr int NameRole = Qt::UserRole + 2;

  explicit ParamTableModel(QObject* parent = nullptr);

  void setCatalog(const model::Catalog* catalog);  // rows without statistics
  void setReport(const model::Catalog* catalog,
                 const analysis::Report* report);  // the caller keeps it alive
  void setReport(const model::Catalog* catalog,
                 std::shared_ptr<const analysis::Report> report);  // kept here
  void clear();
  // Row of the param named `name`, -1 when absent.
  int rowOf(const QString& name) const;
  const analysis::ParamReport* paramReport(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  struct Row {
    QString name;
    int group = 0;
    std::vector<int64_t> shape;
    int64_t numel = 0;
    QString dtype;
    const analysis::ParamReport* stats = nullptr;  // owned by the Session's report
    uint64_t nans = 0, infs = 0;
  };
  QVariant cell(const Row& r, int column, bool forSort) const;
  std::vector<Row> rows_;
  std::shared_ptr<const analysis::Report> kept_;
};

}  // namespace ckptdoc::gui
