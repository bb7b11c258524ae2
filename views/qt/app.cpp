#include "app.h"

#include <spdlog/spdlog.h>

#include <QApplication>
#include <QComboBox>
#include <QIcon>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <utility>

#include "bench_mode.h"
#include "diff_view.h"
#include "layout_map.h"
#include "layout_view.h"
#include "main_window.h"
#include "param_table_model.h"
#include "params_view.h"
#include "plots_view.h"
#include "session.h"

namespace ckptdoc::gui {

namespace {

QString worstParam(const Session& session) {
  return QString::fromStdString(session.core().worst_param());
}

// Screenshot mode: once the analysis ends, show the requested tab (selecting a param), wait for the
// density to load, grab the window and quit with 0 (1 when the grab could not be saved).
void armScreenshot(MainWindow& w, const AppOptions& o) {
  const QString file = QString::fromStdString(*o.screenshot);
  const QString view = QString::fromStdString(o.view);
  const QString wanted = o.param ? QString::fromStdString(*o.param) : QString();
  auto grabAndQuit = [&w, file] {
    QTimer::singleShot(400, &w, [&w, file] {
      auto saved = std::make_shared<bool>(false);
      auto save = [&w, file, saved] {
        if (std::exchange(*saved, true)) return;
        const bool ok = w.grab().save(file);
        std::fprintf(stderr, "%s %s\n",
                     ok ? "screenshot saved:" : "cannot save screenshot:", qPrintable(file));
        QApplication::exit(ok ? 0 : 1);
      };
      // The layout map's picture is made by a job: wait (up to 10 s) until it shows the view as it is.
      auto* map = w.layoutView()->map();
      if (!map->isVisible() || map->pictureCurrent()) return save();
      QObject::connect(map, &LayoutMap::pictureReady, &w, [map, save] {
        if (map->pictureCurrent()) QTimer::singleShot(50, map, save);
      });
      QTimer::singleShot(10000, &w, save);
    });
  };
  const QString compare = o.compare ? QString::fromStdString(*o.compare) : QString();
  auto afterAnalysis = [&w, view, wanted, compare, grabAndQuit] {
    w.showTab(view);
    if (view == QStringLiteral("diff") && !compare.isEmpty()) {  // once B is compared (or failed to be)
      QObject::connect(w.diffView(), &DiffView::diffFinished, &w, grabAndQuit);
      QObject::connect(w.diffView(), &DiffView::diffFailed, &w, grabAndQuit);
      w.compareWith(compare);
      return;
    }
    const QString param = wanted.isEmpty() ? worstParam(*w.session()) : wanted;
    if (param.isEmpty() || view == QStringLiteral("overview")) return grabAndQuit();
    if (view == QStringLiteral("timeline")) {  // its charts are drawn from the samples at once
      w.selectParam(param);
      return grabAndQuit();
    }
    auto* plots = w.paramsView()->plots();
    auto fired = std::make_shared<bool>(false);
    auto once = [fired, grabAndQuit] {
      if (*fired) return;
      *fired = true;
      grabAndQuit();
    };
    QObject::connect(plots, &PlotsView::densityReady, &w, once);
    QTimer::singleShot(5000, &w, once);
    w.selectParam(param);
  };
  if (o.watch) {
    // Attached: once every snapshot committed in the folder at start has been read (60 s at most).
    namespace fs = std::filesystem;
    size_t committed = 0;
    std::error_code ec;
    for (fs::directory_iterator it(*o.watch, ec), end; !ec && it != end; it.increment(ec))
      committed += fs::exists(it->path() / "manifest.json");
    auto fired = std::make_shared<bool>(false);
    auto once = [fired, afterAnalysis] {
      if (!std::exchange(*fired, true)) afterAnalysis();
    };
    QObject::connect(w.session(), &Session::watchSampled, &w, [&w, committed, once] {
      if (w.session()->samples().size() >= committed) once();
    });
    QTimer::singleShot(60000, &w, once);
    return;
  }
  if (!o.path) {
    grabAndQuit();
    return;
  }
  QObject::connect(w.session(), &Session::analysisFinished, &w, afterAnalysis);
  QObject::connect(w.session(), &Session::analysisFailed, &w, grabAndQuit);
  QObject::connect(w.session(), &Session::analysisCancelled, &w, grabAndQuit);
}

}  // namespace

bool parse_app_arguments(int argc, char** argv, AppOptions& o, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](std::string& out) {
      if (i + 1 >= argc) {
        error = a + " needs a value";
        return false;
      }
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--screenshot") {
      if (!next(v)) return false;
      o.screenshot = v;
    } else if (a == "--watch") {
      if (!next(v)) return false;
      o.watch = v;
    } else if (a == "--view") {
      if (!next(o.view)) return false;
    } else if (a == "--compare") {
      if (!next(v)) return false;
      o.compare = v;
    } else if (a == "--param") {
      if (!next(v)) return false;
      o.param = v;
    } else if (a == "--shade") {
      if (!next(v)) return false;
      if (!session::parse_shade(v)) {
        error = "--shade wants param, exact, nonfinite or moments";
        return false;
      }
      o.shade = v;
    } else if (a == "--size") {
      if (!next(v)) return false;
      if (std::sscanf(v.c_str(), "%dx%d", &o.width, &o.height) != 2) {
        error = "--size wants WxH, e.g. 1280x800";
        return false;
      }
    } else if (a == "--bench") {
      if (!next(v)) return false;
      o.bench = std::max(1, std::atoi(v.c_str()));
    } else if (a == "-h" || a == "--help") {
      error =
          "usage: ckptdoc-gui [PATH] [--watch DIR] [--compare B] [--screenshot FILE] [--view "
          "overview|layout|params|diff|timeline|storage] "
          "[--param NAME] "
          "[--shade param|exact|nonfinite|moments] [--size WxH] [--bench N]";
      return false;
    } else if (!a.empty() && a[0] == '-') {
      // Qt's own options (-platform, -style, ...) pass through to QApplication.
    } else if (!o.path) {
      o.path = a;
    } else {
      error = "unexpected argument: " + a;
      return false;
    }
  }
  return true;
}

int run_app(int argc, char** argv, std::optional<std::string> path) {
  AppOptions o;
  o.path = std::move(path);
  return run_app(argc, argv, o);
}

int run_app(int argc, char** argv, const AppOptions& o) {
  std::unique_ptr<QApplication> owned;
  if (!QApplication::instance()) owned = std::make_unique<QApplication>(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("ckptdoc"));
  QApplication::setApplicationName(QStringLiteral("ckptdoc"));
  QApplication::setApplicationDisplayName(QStringLiteral("ckptdoc"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/ckptdoc.svg")));
  MainWindow w;
  if (o.screenshot) {
    w.resize(o.width, o.height);
    armScreenshot(w, o);
  } else if (o.bench) {
    w.resize(o.width, o.height);
    armBench(w, o.bench, o.path.has_value());
  }
  w.show();
  if (o.path) {
    if (o.screenshot) QObject::connect(w.session(), &Session::openFailed, &w, [] { QApplication::exit(2); });
    w.openPath(QString::fromStdString(*o.path), o.screenshot.has_value());
  }
  if (o.watch) w.attach(QString::fromStdString(*o.watch));
  if (!o.screenshot &&
      o.compare) {  // B is compared with the source once it is analysed, as Diff's button does
    const QString b = QString::fromStdString(*o.compare);
    auto done = std::make_shared<bool>(false);
    QObject::connect(w.session(), &Session::analysisFinished, &w, [&w, b, done] {
      if (!std::exchange(*done, true)) w.compareWith(b);
    });
  }
  if (!o.screenshot && o.param) {
    const QString p = QString::fromStdString(*o.param);
    QObject::connect(w.session(), &Session::analysisFinished, &w,
                     [&w, p] { w.paramsView()->selectParam(p); });
  }
  if (!o.screenshot && o.view != "overview") w.showTab(QString::fromStdString(o.view));
  if (o.shade) w.layoutView()->pinShade(*session::parse_shade(*o.shade));
  return QApplication::exec();
}

}  // namespace ckptdoc::gui
