#include "bench_mode.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QMouseEvent>
#include <QScrollBar>
#include <QTableView>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#ifdef __linux__
#include <unistd.h>

#include <ctime>
#endif

#include "layout_map.h"
#include "layout_view.h"
#include "main_window.h"
#include "overview_view.h"
#include "params_view.h"
#include "session.h"

namespace ckptdoc::gui {
namespace {

// Seconds since the kernel started this process (its start time is kept in 10 ms ticks); -1 where unknown.
double secondsSinceProcessStart() {
#ifdef __linux__
  std::ifstream in("/proc/self/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 1));
  std::string skip;
  for (int field = 3; field < 22 && fields >> skip; ++field) {
  }
  unsigned long long start = 0;
  if (!(fields >> start)) return -1;
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9 -
         static_cast<double>(start) / static_cast<double>(sysconf(_SC_CLK_TCK));
#else
  return -1;
#endif
}

struct Stats {
  double median = 0, p95 = 0, max = 0;
};

Stats statsOf(std::vector<double> ms) {
  Stats s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.median = ms[ms.size() / 2];
  s.p95 = ms[std::min(ms.size() - 1, ms.size() * 95 / 100)];
  s.max = ms.back();
  return s;
}

class Bench : public QObject {
 public:
  Bench(MainWindow& w, int frames, bool opening) : QObject(&w), w_(w), frames_(frames), opening_(opening) {
    clock_.start();
    qApp->installEventFilter(this);
    connect(w.session(), &Session::opened, this, [this] { opened_ = true; });
    connect(w.session(), &Session::analysisFinished, this, [this] {
      analysed_ = true;
      std::printf("analysis finished: %.2f s after process start\n", secondsSinceProcessStart());
      std::fflush(stdout);
      if (phase_ == Phase::WaitAnalysis && firstShown_) startPanning();
    });
    auto fail = [](const QString& why) {
      std::fprintf(stderr, "bench: %s\n", qPrintable(why));
      QApplication::exit(2);
    };
    connect(w.session(), &Session::openFailed, this, [fail](const QString&, const QString& m) { fail(m); });
    connect(w.session(), &Session::analysisFailed, this, [fail](int, const QString& m) { fail(m); });
    connect(w.layoutView()->map(), &LayoutMap::pictureReady, this, [this] { ++pictures_; });
    QTimer::singleShot(600000, this, [fail] { fail(QStringLiteral("timed out after 600 s")); });
  }

 protected:
  bool eventFilter(QObject* o, QEvent* e) override {
    if (e->type() != QEvent::Paint) return false;
    auto* painted = qobject_cast<QWidget*>(o);
    if (!painted) return false;
    auto within = [painted](QWidget* w) { return w && (painted == w || w->isAncestorOf(painted)); };
    if (phase_ == Phase::FirstPaint && (!opening_ || opened_) && within(w_.overview())) {
      phase_ = Phase::WaitAnalysis;
      // The paint and the flush to the screen end when this event returns.
      QTimer::singleShot(0, this, [this] { firstPaintShown(); });
    } else if (waiting_ && within(target_)) {
      waiting_ = false;
      paintStart_ = clock_.nsecsElapsed();
      QTimer::singleShot(0, this, [this] { frameShown(); });
    }
    return false;
  }

 private:
  enum class Phase : uint8_t { FirstPaint, WaitAnalysis, Panning, Scrolling, Done };

  void firstPaintShown() {
    std::printf("first paint: %.3f s after process start (%s)\n", secondsSinceProcessStart(),
                opening_ ? "overview of the opened checkpoint" : "empty window");
    std::fflush(stdout);
    firstShown_ = true;
    if (!opening_ || analysed_) startPanning();
  }

  // Runs `next` once the layout map shows a picture made for its current view (10 s at most).
  void whenPictureCurrent(const std::function<void()>& next) {
    auto* map = w_.layoutView()->map();
    if (!map->group()) {
      QTimer::singleShot(300, this, next);
      return;
    }
    auto fired = std::make_shared<bool>(false);
    auto once = [fired, next] {
      if (!std::exchange(*fired, true)) next();
    };
    connect(map, &LayoutMap::pictureReady, this, [map, once] {
      if (map->pictureCurrent()) once();
    });
    QTimer::singleShot(10000, this, once);
    map->update();
  }

  void startPanning() {
    phase_ = Phase::Panning;
    w_.showTab(QStringLiteral("layout"));
    auto* map = w_.layoutView()->map();
    whenPictureCurrent([this, map] {
      // Zoomed in 8x, so there is room to pan; then a drag held down across the frames.
      map->geometry().elements_per_pixel /= 8;
      map->update();
      whenPictureCurrent([this, map] {
        at_ = QPointF(map->width() / 2.0, map->height() / 2.0);
        mouse(QEvent::MouseButtonPress, Qt::LeftButton, Qt::LeftButton);
        target_ = map;
        pictures_ = 0;
        step();
      });
    });
  }

  void startScrolling() {
    phase_ = Phase::Scrolling;
    w_.showTab(QStringLiteral("params"));
    QTimer::singleShot(300, this, [this] {
      target_ = w_.paramsView()->table()->viewport();
      step();
    });
  }

  void mouse(QEvent::Type type, Qt::MouseButton button, Qt::MouseButtons buttons) {
    auto* map = w_.layoutView()->map();
    QMouseEvent ev(type, at_, map->mapToGlobal(at_), button, buttons, Qt::NoModifier);
    QCoreApplication::sendEvent(map, &ev);
  }

  // One frame's input: a 3-pixel drag of the map (turning back every 20 frames), or 3 rows of the table.
  void step() {
    stepStart_ = clock_.nsecsElapsed();
    waiting_ = true;
    const int direction = (done_ / 20) % 2 ? -1 : 1;
    if (phase_ == Phase::Panning) {
      at_ += QPointF(3.0 * direction, 0);
      mouse(QEvent::MouseMove, Qt::NoButton, Qt::LeftButton);
    } else {
      auto* bar = w_.paramsView()->table()->verticalScrollBar();
      if (bar->value() + 3 * scrollDirection_ > bar->maximum() || bar->value() + 3 * scrollDirection_ < 0)
        scrollDirection_ = -scrollDirection_;
      bar->setValue(bar->value() + 3 * scrollDirection_);
    }
    target_->update();  // the empty window has nothing to move: it still paints the frame
  }

  void frameShown() {
    const qint64 now = clock_.nsecsElapsed();
    frame_.push_back(static_cast<double>(now - stepStart_) / 1e6);
    paint_.push_back(static_cast<double>(now - paintStart_) / 1e6);
    if (++done_ < frames_) return step();
    const Stats f = statsOf(frame_), p = statsOf(paint_);
    const bool panning = phase_ == Phase::Panning;
    std::printf(
        "frames %-16s n=%d median=%7.2f ms p95=%7.2f ms max=%7.2f ms | painting: median=%6.2f ms p95=%6.2f "
        "ms",
        panning ? "layout-panning" : "params-scrolling", frames_, f.median, f.p95, f.max, p.median, p.p95);
    if (panning) std::printf(" | pictures landed: %d", pictures_);
    std::printf("\n");
    std::fflush(stdout);
    frame_.clear();
    paint_.clear();
    done_ = 0;
    if (panning) {
      mouse(QEvent::MouseButtonRelease, Qt::LeftButton, Qt::NoButton);
      // Each step supersedes the picture being made: how long after the last one the map shows it exactly.
      const qint64 lastStep = clock_.nsecsElapsed();
      whenPictureCurrent([this, lastStep] {
        if (w_.layoutView()->map()->group())
          std::printf("layout picture current %.1f ms after the last panning step\n",
                      static_cast<double>(clock_.nsecsElapsed() - lastStep) / 1e6);
        startScrolling();
      });
    } else {
      phase_ = Phase::Done;
      QApplication::exit(0);
    }
  }

  MainWindow& w_;
  const int frames_;
  const bool opening_;
  bool opened_ = false, analysed_ = false, firstShown_ = false, waiting_ = false;
  Phase phase_ = Phase::FirstPaint;
  QElapsedTimer clock_;
  QWidget* target_ = nullptr;
  QPointF at_;
  qint64 stepStart_ = 0, paintStart_ = 0;
  int done_ = 0, pictures_ = 0, scrollDirection_ = 1;
  std::vector<double> frame_, paint_;
};

}  // namespace

void armBench(MainWindow& window, int frames, bool opening) {
  new Bench(window, frames, opening);
}

}  // namespace ckptdoc::gui
