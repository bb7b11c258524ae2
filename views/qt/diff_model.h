#pragma once
// A diff of two sources as table rows, worst first: tensors only in A (removed), only in B (added), with
// another shape, then the compared ones as core ordered them (differing before equal, by rel L2). Status,
// max |A-B|, rel L2, exact-equal and within-tolerance fractions; SortRole gives numbers so a
// QSortFilterProxyModel sorts numerically (and by status severity).
#include <QAbstractTableModel>
#include <memory>
#include <optional>
#include <vector>

#include "ckptdoc/analysis/diff.h"

namespace ckptdoc::gui {

class DiffModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Name,
    Status,
    Shape,
    DTypeCol,
    Numel,
    MaxAbsDiff,
    RelL2,
    ExactFraction,
    CloseFraction,
    ColumnCount
  };
  enum class RowStatus { Removed, Added, ShapeChanged, DTypeChanged, Changed, Equal };
  static constexpr int SortRole = Qt::UserRole + 1;
  static constexpr int NameRole = Qt::UserRole + 2;

  explicit DiffModel(QObject* parent = nullptr);

  void setResult(std::shared_ptr<const analysis::DiffResult> result);
  void clear();
  const analysis::DiffResult* result() const { return result_.get(); }

  int rowOf(const QString& name) const;  // -1 when absent
  QString name(int row) const;
  RowStatus status(int row) const;
  // The compared (or shape-changed) tensor of a row; null for added/removed rows.
  const analysis::TensorDiff* tensor(int row) const;
  static QString statusName(RowStatus s);  // "removed", "added", "shape", "dtype", "changed", "equal"

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  struct Row {
    QString name;
    RowStatus status = RowStatus::Equal;
    const analysis::TensorDiff* tensor = nullptr;  // owned by result_
  };
  QVariant cell(const Row& r, int column, bool forSort) const;
  std::vector<Row> rows_;
  std::shared_ptr<const analysis::DiffResult> result_;
};

}  // namespace ckptdoc::gui
