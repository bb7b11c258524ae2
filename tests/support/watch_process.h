#pragma once
// `ckptdoc watch DIR --json` running beside a test, read line by line as it prints: tests wait for an event
// (with a generous timeout, never asserting how fast it came).
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <string>
#include <vector>

#include "test_support.h"

namespace ckptdoc::test {

class WatchProcess {
 public:
  explicit WatchProcess(const std::vector<std::string>& args) {
    QStringList q;
    for (const auto& a : args) q << QString::fromStdString(a);
    p_.start(QString::fromStdString(cli()), q);
    p_.waitForStarted(30000);
  }
  ~WatchProcess() {
    if (p_.state() != QProcess::NotRunning) {
      p_.kill();
      p_.waitForFinished(30000);
    }
  }
  // The next JSON line, waiting up to timeout_ms; an empty object when none came (process ended or timeout).
  QJsonObject next(int timeout_ms = 300000) {
    while (!p_.canReadLine()) {
      if (p_.state() == QProcess::NotRunning) return {};
      if (!p_.waitForReadyRead(timeout_ms) && !p_.canReadLine()) return {};
    }
    const QByteArray line = p_.readLine();
    seen_ += line.toStdString();
    return QJsonDocument::fromJson(line).object();
  }
  // The next line whose "event" is `event` (others are kept in seen()).
  QJsonObject next_event(const std::string& event, int timeout_ms = 300000) {
    for (;;) {
      const QJsonObject o = next(timeout_ms);
      if (o.isEmpty() || o["event"].toString().toStdString() == event) return o;
    }
  }
  int finish(int timeout_ms = 300000) {
    if (!p_.waitForFinished(timeout_ms)) return -1;
    seen_ += p_.readAllStandardOutput().toStdString();
    return p_.exitStatus() == QProcess::NormalExit ? p_.exitCode() : -2;
  }
  std::string seen() const { return seen_; }
  std::string err() { return p_.readAllStandardError().toStdString(); }

 private:
  QProcess p_;
  std::string seen_;
};

}  // namespace ckptdoc::test
