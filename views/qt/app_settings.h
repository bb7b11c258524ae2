#pragma once
// What the app remembers between runs (QSettings): recent checkpoints, the compute device, window
// geometry and dock state.
#include <QByteArray>
#include <QStringList>

#include "ckptdoc/compute/backend.h"

namespace ckptdoc::gui {

class AppSettings {
 public:
  static constexpr int kMaxRecent = 10;
  QStringList recentFiles() const;
  void addRecentFile(const QString& path);  // moves it to the front
  void clearRecentFiles();
  DeviceKind device() const;
  void setDevice(DeviceKind d);
  bool verifyChecksums() const;  // CRC-32 of every record on each analysis (off: it reads everything again)
  void setVerifyChecksums(bool on);
  QByteArray geometry() const;
  QByteArray windowState() const;
  void saveWindow(const QByteArray& geometry, const QByteArray& state);
};

}  // namespace ckptdoc::gui
