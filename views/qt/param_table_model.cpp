#include "param_table_model.h"

#include <QBrush>
#include <QColor>
#include <QLocale>
#include <cmath>

#include "ckptdoc/format/shape_text.h"

namespace ckptdoc::gui {

ParamTableModel::ParamTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void ParamTableModel::clear() {
  beginResetModel();
  rows_.clear();
  kept_.reset();
  endResetModel();
}

void ParamTableModel::setCatalog(const model::Catalog* catalog) {
  setReport(catalog, nullptr);
}

void ParamTableModel::setReport(const model::Catalog* catalog,
                                std::shared_ptr<const analysis::Report> report) {
  const analysis::Report* raw = report.get();
  auto keep = std::move(report);
  setReport(catalog, raw);
  kept_ = std::move(keep);
}

void ParamTableModel::setReport(const model::Catalog* catalog, const analysis::Report* report) {
  beginResetModel();
  kept_.reset();
  rows_.clear();
  if (report) {
    for (const auto& p : report->params) {
      Row r;
      r.name = QString::fromStdString(p.name);
      r.group = p.group;
      r.shape = p.shape;
      r.numel = p.numel;
      r.dtype = QString::fromStdString(std::string(dtype_name(p.lp_dtype)));
      r.stats = &p;
      for (const auto* s : {&p.lp, &p.fp32, &p.exp_avg, &p.exp_avg_sq}) {
        if (!*s) continue;
        r.nans += (*s)->nan;
        r.infs += (*s)->pos_inf + (*s)->neg_inf;
      }
      rows_.push_back(std::move(r));
    }
  } else if (catalog) {
    const QString dtype = QString::fromStdString(std::string(dtype_name(catalog->lp_dtype)));
    for (const auto& g : catalog->groups)
      for (const auto& p : g.params) {
        Row r;
        r.name = QString::fromStdString(p.name);
        r.group = g.index;
        r.shape = p.shape;
        r.numel = p.numel;
        r.dtype = dtype;
        rows_.push_back(std::move(r));
      }
  }
  endResetModel();
}

int ParamTableModel::rowOf(const QString& name) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].name == name) return static_cast<int>(i);
  return -1;
}

const analysis::ParamReport* ParamTableModel::paramReport(int row) const {
  if (row < 0 || row >= static_cast<int>(rows_.size())) return nullptr;
  return rows_[static_cast<size_t>(row)].stats;
}

int ParamTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int ParamTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

namespace {
QString num(double v, int prec = 3) {
  if (!std::isfinite(v)) return QStringLiteral("–");
  return QString::number(v, 'g', prec);
}
}  // namespace

QVariant ParamTableModel::cell(const Row& r, int column, bool forSort) const {
  const auto* s = r.stats;
  const auto& d = s ? s->lp_vs_fp32 : std::optional<DivergenceStats>{};
  const double none = forSort ? -1.0 : std::nan("");
  auto number = [&](double v) -> QVariant { return forSort ? QVariant(v) : QVariant(num(v)); };
  switch (column) {
    case Name:
      return r.name;
    case Group:
      return r.group;
    case Shape: {
      if (forSort) return static_cast<qlonglong>(r.shape.size());
      return QString::fromStdString(shape_text(r.shape));
    }
    case DTypeCol:
      return r.dtype;
    case Numel:
      return forSort ? QVariant(static_cast<qlonglong>(r.numel))
                     : QVariant(QLocale().toString(static_cast<qlonglong>(r.numel)));
    case MaxAbsDiff:
      return d ? number(d->max_abs) : (forSort ? QVariant(none) : QVariant());
    case RelL2:
      return d ? number(d->rel_l2()) : (forSort ? QVariant(none) : QVariant());
    case ExactFraction:
      if (!d) return forSort ? QVariant(none) : QVariant();
      return forSort ? QVariant(d->exact_fraction())
                     : QVariant(QString::number(d->exact_fraction() * 100.0, 'f', 2) + "%");
    case Fp32Rms:
      return s && s->fp32 ? number(s->fp32->rms()) : (forSort ? QVariant(none) : QVariant());
    case ExpAvgRms:
      return s && s->exp_avg ? number(s->exp_avg->rms()) : (forSort ? QVariant(none) : QVariant());
    case ExpAvgSqMean:
      return s && s->exp_avg_sq ? number(s->exp_avg_sq->mean()) : (forSort ? QVariant(none) : QVariant());
    case NaNs:
      return s ? QVariant(static_cast<qulonglong>(r.nans)) : QVariant();
    case Infs:
      return s ? QVariant(static_cast<qulonglong>(r.infs)) : QVariant();
    case Score:
      return s ? number(s->severity_score()) : (forSort ? QVariant(none) : QVariant());
  }
  return {};
}

QVariant ParamTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& r = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return cell(r, index.column(), false);
    case SortRole:
      return cell(r, index.column(), true);
    case NameRole:
      return r.name;
    case Qt::TextAlignmentRole:
      if (index.column() >= Numel) return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
      return {};
    case Qt::ForegroundRole:
      if (index.column() == ExactFraction && r.stats && r.stats->lp_vs_fp32 &&
          r.stats->lp_vs_fp32->exact_fraction() < 0.99)
        return QBrush(QColor(0xc6, 0x28, 0x28));
      if ((index.column() == NaNs && r.nans) || (index.column() == Infs && r.infs))
        return QBrush(QColor(0xc6, 0x28, 0x28));
      return {};
    case Qt::ToolTipRole:
      if (index.column() == Name) return r.name;
      return {};
    default:
      return {};
  }
}

QVariant ParamTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  static const char* names[] = {"Param",           "Group",  "Shape", "DType",    "Numel",
                                "max |Δ|",         "rel L2", "exact", "fp32 rms", "exp_avg rms",
                                "exp_avg_sq mean", "NaN",    "Inf",   "score"};
  // One tip joined from several literals: named, so the array below reads as one string per column.
  static const char* const score_tip =
      "Worst-first sorting key: 10 × the share of elements whose weight is not the "
      "master's rounding, + the relative L2 distance (at most 100), + 1000 when the "
      "weight, master or moments hold NaN/Inf. 0: the master rounds to the weight "
      "everywhere";
  static const char* tips[] = {
      "Parameter name (module state-dict key)",
      "Optimizer param group (ZeRO-3: sub-group)",
      "Full shape",
      "Stored weight dtype",
      "Number of elements",
      "Largest |fp32 master − upcast(weight)|",
      "‖fp32 − weight‖ / ‖weight‖",
      "Fraction of elements where the weight equals the master rounded to the weight dtype",
      "RMS of the fp32 master",
      "RMS of Adam's first moment",
      "Mean of Adam's second moment",
      "NaN count over weights, master and moments",
      "±Inf count over weights, master and moments",
      score_tip};
  if (section < 0 || section >= ColumnCount) return {};
  if (role == Qt::DisplayRole) return QString::fromUtf8(names[section]);
  if (role == Qt::ToolTipRole) return QString::fromUtf8(tips[section]);
  return {};
}

}  // namespace ckptdoc::gui
