#include "findings_model.h"

#include <QBrush>
#include <QStringList>

#include "ckptdoc/short_list.h"
#include "severity_style.h"

namespace ckptdoc::gui {

FindingsModel::FindingsModel(QObject* parent) : QAbstractTableModel(parent) {}

void FindingsModel::setFindings(std::vector<analysis::Finding> findings) {
  beginResetModel();
  findings_ = std::move(findings);
  endResetModel();
}

void FindingsModel::setReport(const analysis::Report* report) {
  beginResetModel();
  findings_.clear();
  if (report) findings_ = report->findings;
  endResetModel();
}

void FindingsModel::setCatalogProblems(const model::Catalog* catalog) {
  beginResetModel();
  findings_.clear();
  if (catalog) {
    for (const auto& p : catalog->problems) {
      analysis::Finding f;
      f.code = p.code;
      f.severity = p.severity;
      f.message = p.message;
      f.params = p.params;
      f.ranks = p.ranks;
      f.details = p.details;
      findings_.push_back(std::move(f));
    }
  }
  endResetModel();
}

void FindingsModel::clear() {
  setReport(nullptr);
}

int FindingsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(findings_.size());
}

int FindingsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

namespace {
QString joinNames(const std::vector<std::string>& names, size_t max_shown = 6) {
  return QString::fromStdString(short_list(names, max_shown));
}
QString joinRanks(const std::vector<int>& ranks) {
  QStringList out;
  for (int r : ranks) out << QString::number(r);
  return out.join(QStringLiteral(", "));
}
}  // namespace

QVariant FindingsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& f = findings_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
    case Qt::ToolTipRole:
      switch (index.column()) {
        case Severity:
          return severityLabel(f.severity);
        case Code:
          return QString::fromStdString(f.code);
        case Message:
          return QString::fromStdString(f.message);
        case Params:
          return joinNames(f.params, role == Qt::ToolTipRole ? 40 : 6);
        case Ranks:
          return joinRanks(f.ranks);
        case Repair:
          return f.repair == analysis::RepairKind::None ? QString() : repairLabel(f.repair);
      }
      break;
    case Qt::BackgroundRole:
      return QBrush(severityBackground(f.severity));
    case Qt::ForegroundRole:
      if (index.column() == Severity) return QBrush(severityColor(f.severity));
      break;
    case SeverityRole:
      return static_cast<int>(f.severity);
    case RepairRole:
      return static_cast<int>(f.repair);
    default:
      break;
  }
  return {};
}

QVariant FindingsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Severity:
      return QStringLiteral("Severity");
    case Code:
      return QStringLiteral("Finding");
    case Message:
      return QStringLiteral("What it means");
    case Params:
      return QStringLiteral("Params");
    case Ranks:
      return QStringLiteral("Ranks");
    case Repair:
      return QStringLiteral("Repair");
  }
  return {};
}

}  // namespace ckptdoc::gui
