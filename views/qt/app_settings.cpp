#include "app_settings.h"

#include <QSettings>

namespace ckptdoc::gui {

QStringList AppSettings::recentFiles() const {
  return QSettings().value(QStringLiteral("recentFiles")).toStringList();
}

void AppSettings::addRecentFile(const QString& path) {
  QStringList files = recentFiles();
  files.removeAll(path);
  files.prepend(path);
  while (files.size() > kMaxRecent) files.removeLast();
  QSettings().setValue(QStringLiteral("recentFiles"), files);
}

void AppSettings::clearRecentFiles() {
  QSettings().remove(QStringLiteral("recentFiles"));
}

DeviceKind AppSettings::device() const {
  const int v = QSettings().value(QStringLiteral("device"), static_cast<int>(DeviceKind::Auto)).toInt();
  return v >= 0 && v <= static_cast<int>(DeviceKind::Cuda) ? static_cast<DeviceKind>(v) : DeviceKind::Auto;
}

void AppSettings::setDevice(DeviceKind d) {
  QSettings().setValue(QStringLiteral("device"), static_cast<int>(d));
}

bool AppSettings::verifyChecksums() const {
  return QSettings().value(QStringLiteral("verifyChecksums"), false).toBool();
}

void AppSettings::setVerifyChecksums(bool on) {
  QSettings().setValue(QStringLiteral("verifyChecksums"), on);
}

QByteArray AppSettings::geometry() const {
  return QSettings().value(QStringLiteral("window/geometry")).toByteArray();
}
QByteArray AppSettings::windowState() const {
  return QSettings().value(QStringLiteral("window/state")).toByteArray();
}

void AppSettings::saveWindow(const QByteArray& geometry, const QByteArray& state) {
  QSettings s;
  s.setValue(QStringLiteral("window/geometry"), geometry);
  s.setValue(QStringLiteral("window/state"), state);
}

}  // namespace ckptdoc::gui
