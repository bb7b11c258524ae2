#pragma once
// The session's background jobs as a table (ImHex's task manager): title, kind, state, progress and stage of
// every queued or running job. refresh() re-reads the session's job list: rows come and go with jobs and
// progress cells change in place.
#include <QAbstractTableModel>
#include <vector>

#include "ckptdoc/session/job.h"

namespace ckptdoc::gui {

class Session;

class JobsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Title, Kind, State, Progress, Stage, Seconds, ColumnCount };
  static constexpr int FractionRole = Qt::UserRole + 1;  // progress as 0..1

  explicit JobsModel(Session* session, QObject* parent = nullptr);
  void refresh();
  session::JobPtr job(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  Session* session_;
  std::vector<session::JobPtr> jobs_;
};

}  // namespace ckptdoc::gui
