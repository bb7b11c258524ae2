#include "timeline_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "session.h"
#include "severity_style.h"

namespace ckptdoc::gui {

TimelineModel::TimelineModel(const Session* session, QObject* parent)
    : QAbstractTableModel(parent), session_(session) {}

void TimelineModel::refresh() {
  beginResetModel();
  const auto& samples = session_->samples();
  order_.resize(samples.size());
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
    return samples[static_cast<size_t>(a)].step < samples[static_cast<size_t>(b)].step;
  });
  endResetModel();
}

void TimelineModel::refreshStates() {
  if (!order_.empty()) emit dataChanged(index(0, State), index(rowCount() - 1, State), {Qt::DisplayRole});
}

int TimelineModel::sampleIndex(int row) const {
  return row >= 0 && row < static_cast<int>(order_.size()) ? order_[static_cast<size_t>(row)] : -1;
}

int TimelineModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(order_.size());
}

int TimelineModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant TimelineModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& samples = session_->samples();
  const size_t i = static_cast<size_t>(order_[static_cast<size_t>(index.row())]);
  if (i >= samples.size()) return {};
  const auto& w = samples[i];
  const auto& s = w.summary;
  const bool sort = role == SortRole;
  if (role == Qt::ForegroundRole && index.column() == Worst && !s.worst_severity.empty())
    return severityColor(s.worst_severity == "error"     ? analysis::Severity::Error
                         : s.worst_severity == "warning" ? analysis::Severity::Warning
                                                         : analysis::Severity::Info);
  if (role == Qt::ToolTipRole) return QString::fromStdString(w.snapshot.path);
  if (role != Qt::DisplayRole && !sort) return {};
  auto optional = [&](const std::optional<double>& v, char f, int prec) -> QVariant {
    if (!v || !std::isfinite(*v)) return sort ? QVariant(-1.0) : QVariant(QStringLiteral("—"));
    return sort ? QVariant(*v) : QVariant(QString::number(*v, f, prec));
  };
  switch (index.column()) {
    case Step:
      return sort ? QVariant(static_cast<qlonglong>(w.step)) : QVariant(QString::number(w.step));
    case Tag:
      return QString::fromStdString(w.snapshot.label.empty() ? s.tag : w.snapshot.label);
    case Worst:
      return s.worst_severity.empty() ? QStringLiteral("ok")
                                      : QString::fromStdString(s.worst_severity + " " + s.worst_code);
    case ExactFraction:
      if (std::isnan(s.exact_fraction)) return sort ? QVariant(-1.0) : QVariant(QStringLiteral("—"));
      return sort ? QVariant(s.exact_fraction)
                  : QVariant(QStringLiteral("%1 %").arg(s.exact_fraction * 100, 0, 'f', 2));
    case GradNorm:
      return optional(s.grad_norm, 'g', 4);
    case LossScale:
      return optional(s.loss_scale, 'g', 6);
    case NonFiniteValues:
      return sort ? QVariant(static_cast<qulonglong>(s.nonfinite_values))
                  : QVariant(QString::number(s.nonfinite_values));
    case NonFiniteGrads:
      return sort ? QVariant(static_cast<qulonglong>(s.nonfinite_grads))
                  : QVariant(QString::number(s.nonfinite_grads));
    case State:
      return w.removed ? tr("deleted") : QString();
    default:
      return {};
  }
}

QVariant TimelineModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Step:
      return tr("Step");
    case Tag:
      return tr("Snapshot");
    case Worst:
      return tr("Worst finding");
    case ExactFraction:
      return tr("Exact");
    case GradNorm:
      return tr("Grad norm");
    case LossScale:
      return tr("Loss scale");
    case NonFiniteValues:
      return tr("NaN/Inf values");
    case NonFiniteGrads:
      return tr("NaN/Inf grads");
    case State:
      return tr("Folder");
    default:
      return {};
  }
}

}  // namespace ckptdoc::gui
