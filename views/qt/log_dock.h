#pragma once
// The log dock: spdlog messages from any thread, forwarded to the UI thread by a custom sink and appended
// to a read-only text view (errors in red).
#include <QDockWidget>
#include <memory>

class QPlainTextEdit;

namespace spdlog::sinks {
class sink;
}

namespace ckptdoc::gui {

class LogDock : public QDockWidget {
  Q_OBJECT
 public:
  explicit LogDock(QWidget* parent = nullptr);
  ~LogDock() override;
  QString text() const;

 public slots:
  void append(int level, const QString& message);

 private:
  QPlainTextEdit* view_;
  std::shared_ptr<spdlog::sinks::sink> sink_;
};

}  // namespace ckptdoc::gui
