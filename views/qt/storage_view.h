#pragma once
// The Storage tab of a self-reporting source (PyTorch DCP, Accelerate FSDP, Megatron-core: whatever the
// session opened as a storage map): a line naming the format and its files, the storage map (rows = files,
// items to scale of their bytes), and the table of stored keys. Clicking an item selects its key's row.
#include <QWidget>

class QLabel;
class QTableView;

namespace ckptdoc::gui {

class Session;
class StorageMapWidget;
class StoredKeysModel;

class StorageView : public QWidget {
  Q_OBJECT
 public:
  explicit StorageView(Session* session, QWidget* parent = nullptr);
  StorageMapWidget* map() const { return map_; }
  StoredKeysModel* keys() const { return keys_; }
  QTableView* table() const { return table_; }
  QLabel* summary() const { return summary_; }
  void selectKey(const QString& key);

 private:
  void reload();

  Session* session_;
  QLabel* summary_;
  StorageMapWidget* map_;
  StoredKeysModel* keys_;
  QTableView* table_;
};

}  // namespace ckptdoc::gui
