#include "log_dock.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <QDateTime>
#include <QPlainTextEdit>
#include <QPointer>
#include <algorithm>
#include <mutex>

namespace ckptdoc::gui {

namespace {

// Formats on the logging thread, then hands the line to the dock with a queued call: the UI thread owns
// the widget. A destroyed dock makes the sink a no-op.
class QtForwardingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit QtForwardingSink(LogDock* dock) : dock_(dock) {}
  void detach() {
    std::lock_guard<std::mutex> lock(this->mutex_);
    dock_ = nullptr;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!dock_) return;
    spdlog::memory_buf_t buf;
    this->formatter_->format(msg, buf);
    QString line = QString::fromUtf8(buf.data(), static_cast<qsizetype>(buf.size())).trimmed();
    const int level = static_cast<int>(msg.level);
    QPointer<LogDock> dock(dock_);
    QMetaObject::invokeMethod(
        dock_,
        [dock, level, line] {
          if (dock) dock->append(level, line);
        },
        Qt::QueuedConnection);
  }
  void flush_() override {}

 private:
  LogDock* dock_;
};

}  // namespace

LogDock::LogDock(QWidget* parent) : QDockWidget(tr("Log"), parent) {
  setObjectName(QStringLiteral("logDock"));
  view_ = new QPlainTextEdit(this);
  view_->setReadOnly(true);
  view_->setMaximumBlockCount(5000);
  view_->setFont(QFont(QStringLiteral("monospace")));
  setWidget(view_);
  auto sink = std::make_shared<QtForwardingSink>(this);
  sink->set_pattern("%H:%M:%S.%e %^%l%$ %v");
  sink_ = sink;
  spdlog::default_logger()->sinks().push_back(sink_);
}

LogDock::~LogDock() {
  static_cast<QtForwardingSink*>(sink_.get())->detach();
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
}

void LogDock::append(int level, const QString& message) {
  const bool bad = level >= static_cast<int>(spdlog::level::err);
  const bool warn = level == static_cast<int>(spdlog::level::warn);
  if (bad || warn)
    view_->appendHtml(
        QStringLiteral("<span style='color:%1'>%2</span>")
            .arg(bad ? QStringLiteral("#c62828") : QStringLiteral("#b06000"), message.toHtmlEscaped()));
  else
    view_->appendPlainText(message);
}

QString LogDock::text() const {
  return view_->toPlainText();
}

}  // namespace ckptdoc::gui
