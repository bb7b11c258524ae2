#include "diff_model.h"

#include <cmath>

#include "ckptdoc/format/shape_text.h"

namespace ckptdoc::gui {

namespace {

QString shapeText(const std::vector<int64_t>& s) {
  return QString::fromStdString(shape_text(s));
}

QString number(double v) {
  if (std::isinf(v)) return QStringLiteral("inf");
  return QString::number(v, 'g', 4);
}

}  // namespace

DiffModel::DiffModel(QObject* parent) : QAbstractTableModel(parent) {}

QString DiffModel::statusName(RowStatus s) {
  switch (s) {
    case RowStatus::Removed:
      return QStringLiteral("removed");
    case RowStatus::Added:
      return QStringLiteral("added");
    case RowStatus::ShapeChanged:
      return QStringLiteral("shape");
    case RowStatus::DTypeChanged:
      return QStringLiteral("dtype");
    case RowStatus::Changed:
      return QStringLiteral("changed");
    case RowStatus::Equal:
      return QStringLiteral("equal");
  }
  return {};
}

void DiffModel::setResult(std::shared_ptr<const analysis::DiffResult> result) {
  beginResetModel();
  rows_.clear();
  result_ = std::move(result);
  if (result_) {
    for (const auto& n : result_->removed)
      rows_.push_back({QString::fromStdString(n), RowStatus::Removed, nullptr});
    for (const auto& n : result_->added)
      rows_.push_back({QString::fromStdString(n), RowStatus::Added, nullptr});
    for (const auto& d : result_->shape_changed)
      rows_.push_back({QString::fromStdString(d.name), RowStatus::ShapeChanged, &d});
    for (const auto& d : result_->compared) {
      // Values first: a tensor whose values moved is "changed" even when its dtype changed too.
      const RowStatus s = !d.values_equal()        ? RowStatus::Changed
                          : d.dtype_a != d.dtype_b ? RowStatus::DTypeChanged
                                                   : RowStatus::Equal;
      rows_.push_back({QString::fromStdString(d.name), s, &d});
    }
  }
  endResetModel();
}

void DiffModel::clear() {
  setResult(nullptr);
}

int DiffModel::rowOf(const QString& name) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].name == name) return static_cast<int>(i);
  return -1;
}

QString DiffModel::name(int row) const {
  return row >= 0 && row < static_cast<int>(rows_.size()) ? rows_[static_cast<size_t>(row)].name : QString();
}

DiffModel::RowStatus DiffModel::status(int row) const {
  return rows_.at(static_cast<size_t>(row)).status;
}

const analysis::TensorDiff* DiffModel::tensor(int row) const {
  return row >= 0 && row < static_cast<int>(rows_.size()) ? rows_[static_cast<size_t>(row)].tensor : nullptr;
}

int DiffModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int DiffModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant DiffModel::cell(const Row& r, int column, bool forSort) const {
  const auto* t = r.tensor;
  const bool compared = t && r.status != RowStatus::ShapeChanged;
  switch (column) {
    case Name:
      return r.name;
    case Status:
      return forSort ? QVariant(static_cast<int>(r.status)) : QVariant(statusName(r.status));
    case Shape:
      if (!t) return forSort ? QVariant(QString()) : QVariant();
      return t->shape_a == t->shape_b ? shapeText(t->shape_a)
                                      : shapeText(t->shape_a) + QStringLiteral(" → ") + shapeText(t->shape_b);
    case DTypeCol: {
      if (!t) return forSort ? QVariant(QString()) : QVariant();
      const QString a = QString::fromUtf8(dtype_name(t->dtype_a).data());
      return t->dtype_a == t->dtype_b
                 ? a
                 : a + QStringLiteral(" → ") + QString::fromUtf8(dtype_name(t->dtype_b).data());
    }
    case Numel:
      if (!compared) return forSort ? QVariant(-1.0) : QVariant();
      return forSort ? QVariant(static_cast<double>(t->numel)) : QVariant(QString::number(t->numel));
    case MaxAbsDiff:
      if (!compared) return forSort ? QVariant(-1.0) : QVariant();
      return forSort ? QVariant(t->max_abs) : QVariant(number(t->max_abs));
    case RelL2:
      if (!compared) return forSort ? QVariant(-1.0) : QVariant();
      return forSort ? QVariant(t->rel_l2()) : QVariant(number(t->rel_l2()));
    case ExactFraction:
      if (!compared) return forSort ? QVariant(-1.0) : QVariant();
      return forSort ? QVariant(t->exact_fraction())
                     : QVariant(QStringLiteral("%1 %").arg(t->exact_fraction() * 100.0, 0, 'f', 3));
    case CloseFraction: {
      if (!compared) return forSort ? QVariant(-1.0) : QVariant();
      const double f = t->numel ? double(t->close) / double(t->numel) : 1.0;
      return forSort ? QVariant(f) : QVariant(QStringLiteral("%1 %").arg(f * 100.0, 0, 'f', 3));
    }
    default:
      return {};
  }
}

QVariant DiffModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= static_cast<int>(rows_.size()) || index.column() >= ColumnCount)
    return {};
  const auto& r = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return cell(r, index.column(), false);
    case SortRole:
      return cell(r, index.column(), true);
    case NameRole:
      return r.name;
    case Qt::ToolTipRole:
      return index.column() == Name ? QVariant(r.name) : QVariant();  // names elide
    case Qt::TextAlignmentRole:
      if (index.column() >= Numel) return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      return {};
    default:
      return {};
  }
}

QVariant DiffModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Name:
      return tr("Tensor");
    case Status:
      return tr("Status");
    case Shape:
      return tr("Shape");
    case DTypeCol:
      return tr("Dtype");
    case Numel:
      return tr("Numel");
    case MaxAbsDiff:
      return tr("max |A−B|");
    case RelL2:
      return tr("rel L2");
    case ExactFraction:
      return tr("Exact equal");
    case CloseFraction:
      return tr("Within tol.");
    default:
      return {};
  }
}

}  // namespace ckptdoc::gui
