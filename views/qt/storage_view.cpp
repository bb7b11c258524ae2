#include "storage_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "ckptdoc/human_bytes.h"
#include "session.h"
#include "storage_map_widget.h"
#include "stored_keys_model.h"

namespace ckptdoc::gui {

StorageView::StorageView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  summary_ = new QLabel(this);
  summary_->setObjectName(QStringLiteral("storageSummary"));
  summary_->setWordWrap(true);
  map_ = new StorageMapWidget(session_, this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(map_);
  scroll->setWidgetResizable(true);
  keys_ = new StoredKeysModel(this);
  table_ = new QTableView(this);
  table_->setObjectName(QStringLiteral("storedKeys"));
  table_->setModel(keys_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setWordWrap(false);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(scroll);
  split->addWidget(table_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(summary_);
  layout->addWidget(split, 1);
  connect(session_, &Session::opened, this, &StorageView::reload);
  connect(session_, &Session::closed, this, &StorageView::reload);
  connect(map_, &StorageMapWidget::keyClicked, this, &StorageView::selectKey);
  reload();
}

void StorageView::reload() {
  const auto* map = session_->core().storage_map();
  keys_->setMap(map);
  table_->resizeColumnsToContents();
  if (!map) {
    summary_->setText(
        tr("No storage map: this tab shows the files and keys of a PyTorch Distributed Checkpoint "
           "(FSDP2, torchtitan), an Accelerate FSDP save_state folder or a Megatron-core "
           "iteration folder."));
    return;
  }
  uint64_t bytes = 0;
  int absent = 0;
  for (const auto& f : map->files) {
    bytes += f.size;
    absent += f.present ? 0 : 1;
  }
  summary_->setText(tr("%1 — %2 storage files (%3)%4, %5 keys. Rows: files, to scale of their bytes; "
                       "colours: keys.")
                        .arg(QString::fromStdString(map->format))
                        .arg(map->files.size())
                        .arg(QString::fromStdString(human_bytes(bytes)))
                        .arg(absent ? tr(", %1 not on disk").arg(absent) : QString())
                        .arg(map->keys.size()));
}

void StorageView::selectKey(const QString& key) {
  const int row = keys_->rowOf(key);
  if (row < 0) return;
  table_->selectRow(row);
  table_->scrollTo(keys_->index(row, 0));
}

}  // namespace ckptdoc::gui
