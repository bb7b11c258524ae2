// Nothing heavy on the UI thread: a slow fake file system (this executable's own open(), which sleeps for
// files under a "/slow-fs/" folder and records the calling thread) makes opening a checkpoint and planning a
// repair take seconds; the window keeps handling events meanwhile, every slow open happens off the UI thread,
// and plan requests typed while one is computing are coalesced (the ones in between never run). The same for
// a diff against a slow second source: off the UI thread, a newer request supersedes it, and it can be
// cancelled.
#include <dlfcn.h>
#include <fcntl.h>

#include <QElapsedTimer>
#include <QPushButton>
#include <QSignalSpy>
#include <QTimer>
#include <QtTest>
#include <atomic>
#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "diff_model.h"
#include "diff_view.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "main_window.h"
#include "repair_dialog.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

std::atomic<int> g_delay_ms{0};
std::mutex g_mutex;
std::vector<std::pair<std::string, std::thread::id>> g_opens;  // slow files opened, and by which thread

void slow_down(const char* path) {
  if (!path || !std::strstr(path, "/slow-fs/")) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_opens.emplace_back(path, std::this_thread::get_id());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(g_delay_ms.load()));
}

template <class Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

std::vector<std::pair<std::string, std::thread::id>> takeOpens() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return std::exchange(g_opens, {});
}

}  // namespace

// The slow fake file system: every open() in this process passes through here (core's memory maps included).
extern "C" int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = static_cast<mode_t>(va_arg(ap, int));
    va_end(ap);
  }
  static const auto next = real<int (*)(const char*, int, ...)>("open");
  slow_down(path);
  return next(path, flags, mode);
}

extern "C" int open64(const char* path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = static_cast<mode_t>(va_arg(ap, int));
    va_end(ap);
  }
  static const auto next = real<int (*)(const char*, int, ...)>("open64");
  slow_down(path);
  return next(path, flags, mode);
}

class TestSessionThreads : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
  }

  void cleanup() {
    g_delay_ms = 0;
    takeOpens();
  }

  void slowOpenLeavesTheWindowResponsive() {
    test::TempDir dir;
    const std::string slow = dir.file("slow-fs/ckpt");
    std::filesystem::create_directories(dir.file("slow-fs"));
    test::copy_tree(test::healthy_fixture("zero2_fp16_ws2"), slow);
    takeOpens();       // the copy above wrote there; from here on only the app opens files
    g_delay_ms = 400;  // per file: the catalog maps three of them
    MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    int ticksWhileOpening = 0;
    QTimer ticker;
    ticker.setInterval(10);
    connect(&ticker, &QTimer::timeout, &w, [&] { ticksWhileOpening += w.session()->isOpening(); });
    ticker.start();
    QSignalSpy opened(w.session(), &Session::opened);
    QElapsedTimer clock;
    clock.start();
    w.openPath(QString::fromStdString(slow), true);
    QVERIFY(w.session()->isOpening());  // the call came back while the files are still being read
    QVERIFY(!w.session()->isOpen());
    QVERIFY(opened.wait(60000));
    QVERIFY2(clock.elapsed() >= 3 * 400, "the fake file system was not slow");
    // The UI thread ran its timer all along: it never waited for a file.
    QVERIFY2(ticksWhileOpening >= 10, qPrintable(QString::number(ticksWhileOpening)));
    const auto opens = takeOpens();
    QVERIFY(opens.size() >= 3);
    for (const auto& [path, thread] : opens)
      QVERIFY2(thread != std::this_thread::get_id(), ("opened on the UI thread: " + path).c_str());
    QCOMPARE(w.session()->catalog()->groups.size(), size_t{2});
  }

  void slowPlansRunOffTheUiThreadAndCoalesce() {
    test::TempDir dir;
    std::filesystem::create_directories(dir.file("slow-fs"));
    std::vector<QString> templates;
    for (int i = 1; i <= 5; ++i) {
      const std::string t = dir.file("slow-fs/template" + std::to_string(i));
      test::copy_tree(test::healthy_fixture("zero2_fp16_ws2"), t);
      templates.push_back(QString::fromStdString(t));
    }
    MainWindow w;
    w.show();
    QSignalSpy analysed(w.session(), &Session::analysisFinished);
    w.openPath(QString::fromStdString(test::healthy_fixture("zero2_fp16_ws2")), true);
    QVERIFY(analysed.wait(60000));
    RepairDialog d(w.session(), analysis::RepairKind::Repartition, &w);
    d.setOutput(QString::fromStdString(dir.file("out")));
    QSignalSpy planned(&d, &RepairDialog::planReady);
    QVERIFY(planned.wait(30000));  // the world-size plan
    QTRY_VERIFY(!d.planning());
    planned.clear();

    takeOpens();
    g_delay_ms = 300;  // each plan maps the template's three files
    int ticksWhilePlanning = 0;
    QTimer ticker;
    ticker.setInterval(10);
    connect(&ticker, &QTimer::timeout, &d, [&] { ticksWhilePlanning += d.planning(); });
    ticker.start();
    // Typing five templates in a row: the first plan runs, the next three are superseded before they start,
    // the last one runs after it.
    for (const auto& t : templates) {
      d.setTemplate(t);
      QVERIFY(d.planning());
      QVERIFY(!d.planValid());
      QTest::qWait(20);
    }
    QVERIFY(planned.wait(60000));
    QTRY_VERIFY(!d.planning());
    QCOMPARE(planned.count(), 1);  // only the newest request's plan arrived
    QVERIFY2(d.planValid(), qPrintable(d.planText()));
    QVERIFY(d.planText().contains(templates.back()));
    QVERIFY2(ticksWhilePlanning >= 10, qPrintable(QString::number(ticksWhilePlanning)));
    std::set<std::string> planned_on;
    for (const auto& [path, thread] : takeOpens()) {
      QVERIFY2(thread != std::this_thread::get_id(), ("planned on the UI thread: " + path).c_str());
      for (size_t i = 0; i < templates.size(); ++i)
        if (path.rfind(templates[i].toStdString() + "/", 0) == 0)
          planned_on.insert(templates[i].toStdString());
    }
    QVERIFY(planned_on ==
            (std::set<std::string>{templates.front().toStdString(), templates.back().toStdString()}));
  }

  void slowDiffRunsOffTheUiThreadSupersedesAndCancels() {
    test::TempDir dir;
    std::filesystem::create_directories(dir.file("slow-fs"));
    const std::string slow = dir.file("slow-fs/other");
    test::copy_tree(test::healthy_fixture("zero2_fp16_ws2"), slow);
    MainWindow w;
    w.show();
    QSignalSpy opened(w.session(), &Session::opened);
    w.openPath(QString::fromStdString(test::healthy_fixture("zero2_fp16_ws2")), true);
    QVERIFY(opened.wait(60000));
    auto* view = w.diffView();
    QSignalSpy finished(view, &DiffView::diffFinished);
    takeOpens();
    g_delay_ms = 300;  // per file: B's catalog maps three of them
    int ticksWhileDiffing = 0;
    QTimer ticker;
    ticker.setInterval(10);
    connect(&ticker, &QTimer::timeout, view, [&] { ticksWhileDiffing += view->running(); });
    ticker.start();
    w.compareWith(QString::fromStdString(slow));
    QVERIFY(view->running());  // the call came back while B is still being opened
    const auto first = view->job();
    // Another `what` while the fp32 diff runs: the fp32 one is superseded, only the exp_avg result arrives.
    view->setWhat(analysis::DiffWhat::ExpAvg);
    QVERIFY(view->job() != first);
    QVERIFY(finished.wait(60000));
    QTRY_VERIFY(!view->running());
    QTest::qWait(200);
    QCOMPARE(finished.count(), 1);
    QCOMPARE(first->state(), session::JobState::Superseded);
    QVERIFY(QString::fromStdString(view->model()->result()->a).contains("exp_avg"));
    QVERIFY(view->summaryText().startsWith("equal"));  // a copy
    QVERIFY2(ticksWhileDiffing >= 10, qPrintable(QString::number(ticksWhileDiffing)));
    const auto opens = takeOpens();
    QVERIFY(opens.size() >= 3);
    for (const auto& [path, thread] : opens)
      QVERIFY2(thread != std::this_thread::get_id(), ("diffed on the UI thread: " + path).c_str());

    // Cancel from the tab's button: the job ends cancelled and the table stays empty.
    QSignalSpy cancelled(view, &DiffView::diffCancelled);
    view->setWhat(analysis::DiffWhat::Fp32);
    QVERIFY(view->running());
    QVERIFY(view->cancelButton()->isVisibleTo(view));
    view->cancelButton()->click();
    QVERIFY(cancelled.wait(60000));
    QCOMPARE(view->job()->state(), session::JobState::Cancelled);
    QCOMPARE(view->model()->rowCount(), 0);
    QVERIFY(!view->cancelButton()->isVisibleTo(view));
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestSessionThreads)
#include "test_session_threads.moc"
