#include "stored_keys_model.h"

#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/human_bytes.h"
#include "ckptdoc/session/storage_picture.h"

namespace ckptdoc::gui {

void StoredKeysModel::setMap(const sources::StorageMap* map) {
  beginResetModel();
  keys_ = map ? map->keys : std::vector<sources::StoredKey>{};
  endResetModel();
}

int StoredKeysModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(keys_.size());
}

int StoredKeysModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant StoredKeysModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || static_cast<size_t>(index.row()) >= keys_.size()) return {};
  const auto& k = keys_[static_cast<size_t>(index.row())];
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  switch (index.column()) {
    case Key:
      return QString::fromStdString(k.key);
    case Kind:
      return k.tensor ? tr("tensor") : tr("bytes");
    case Dtype:
      return QString::fromStdString(k.dtype);
    case Shape:
      return k.tensor ? QString::fromStdString(shape_text(k.shape)) : QString();
    case Chunks:
      return static_cast<int>(k.chunks.size());
    case Where: {
      QStringList parts;
      for (const auto& c : k.chunks) {
        const QString file = c.file.empty() ? tr("(no storage item)") : QString::fromStdString(c.file);
        parts << (k.tensor ? QStringLiteral("%1 %2").arg(
                                 file, QString::fromStdString(session::box_text(c.offsets, c.sizes)))
                           : file) +
                     QStringLiteral(" @%1 (%2)")
                         .arg(c.offset)
                         .arg(QString::fromStdString(human_bytes(c.length)));
      }
      return parts.join(role == Qt::ToolTipRole ? QStringLiteral("\n") : QStringLiteral("; "));
    }
    default:
      return {};
  }
}

QVariant StoredKeysModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Key:
      return tr("Key");
    case Kind:
      return tr("Kind");
    case Dtype:
      return tr("Dtype");
    case Shape:
      return tr("Shape");
    case Chunks:
      return tr("Chunks");
    case Where:
      return tr("Where (file, box, byte offset)");
    default:
      return {};
  }
}

int StoredKeysModel::rowOf(const QString& key) const {
  const std::string k = key.toStdString();
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i].key == k) return static_cast<int>(i);
  return -1;
}

}  // namespace ckptdoc::gui
