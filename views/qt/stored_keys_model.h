#pragma once
// The stored keys of a self-reporting source (sources::StorageMap::keys) as a table: key, kind, dtype, global
// shape, chunk count, and where each chunk is (file, box, byte range).
#include <QAbstractTableModel>

#include "ckptdoc/sources/storage_map.h"

namespace ckptdoc::gui {

class StoredKeysModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Key, Kind, Dtype, Shape, Chunks, Where, ColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setMap(const sources::StorageMap* map);  // null: empty
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
  int rowOf(const QString& key) const;  // -1 when absent

 private:
  std::vector<sources::StoredKey> keys_;
};

}  // namespace ckptdoc::gui
