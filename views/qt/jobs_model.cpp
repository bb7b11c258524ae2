#include "jobs_model.h"

#include "session.h"

namespace ckptdoc::gui {

JobsModel::JobsModel(Session* session, QObject* parent) : QAbstractTableModel(parent), session_(session) {
  if (session_) connect(session_, &Session::jobsProgressed, this, &JobsModel::refresh);
}

void JobsModel::refresh() {
  auto now = session_ ? session_->core().jobs() : std::vector<session::JobPtr>{};
  if (now != jobs_) {  // jobs came or went: new rows
    beginResetModel();
    jobs_ = std::move(now);
    endResetModel();
  } else if (!jobs_.empty()) {
    emit dataChanged(index(0, State), index(rowCount() - 1, Seconds));
  }
}

session::JobPtr JobsModel::job(int row) const {
  return row >= 0 && row < rowCount() ? jobs_[static_cast<size_t>(row)] : nullptr;
}

int JobsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(jobs_.size());
}

int JobsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant JobsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& j = *jobs_[static_cast<size_t>(index.row())];
  if (role == FractionRole) return j.fraction();
  if (role == Qt::TextAlignmentRole && (index.column() == Progress || index.column() == Seconds))
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  switch (index.column()) {
    case Title:
      return QString::fromStdString(j.title());
    case Kind:
      return QString::fromUtf8(session::job_kind_name(j.kind()).data());
    case State:
      return QString::fromUtf8(session::job_state_name(j.state()).data());
    case Progress:
      return j.total() ? QStringLiteral("%1 %").arg(100.0 * j.fraction(), 0, 'f', 1) : QString();
    case Stage:
      return QString::fromStdString(j.stage());
    case Seconds:
      return QString::number(j.seconds(), 'f', 1);
  }
  return {};
}

QVariant JobsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Title:
      return tr("Job");
    case Kind:
      return tr("Kind");
    case State:
      return tr("State");
    case Progress:
      return tr("Progress");
    case Stage:
      return tr("Stage");
    case Seconds:
      return tr("Seconds");
  }
  return {};
}

}  // namespace ckptdoc::gui
