#pragma once
// The snapshots of an attached run as table rows, in step order: step, tag, worst finding, exact fraction,
// grad norm, loss scale, NaN/Inf counts, and whether the folder is gone. Reads only the session's samples
// (summaries made on the watch's worker); refresh() after each sample.
#include <QAbstractTableModel>
#include <vector>

namespace ckptdoc::gui {

class Session;

class TimelineModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    Step,
    Tag,
    Worst,
    ExactFraction,
    GradNorm,
    LossScale,
    NonFiniteValues,
    NonFiniteGrads,
    State,
    ColumnCount
  };
  static constexpr int SortRole = Qt::UserRole + 1;

  explicit TimelineModel(const Session* session, QObject* parent = nullptr);
  void refresh();
  // A sample was marked deleted: only the Folder column changes (no reset, so a burst that deletes one
  // snapshot and commits another still resets the model once).
  void refreshStates();
  // Index into session->samples() of row `row` (rows are in step order).
  int sampleIndex(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  const Session* session_;
  std::vector<int> order_;  // sample indices by step
};

}  // namespace ckptdoc::gui
