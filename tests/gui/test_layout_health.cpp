// "Which rank?" at a glance: a real fixture re-partitioned to 64 ranks by `ckptdoc repair --repartition`,
// then one rank's fp32 masters replaced with random values. Shaded by exact fraction, the layout map paints
// that rank's fragments in a colour no other rank has (also when 64 ranks share 70 pixel rows), the diagnosis
// names that rank alone, and the overview strip's divergence lane marks the params it holds. Without a click,
// `ckptdoc demo` (stale fp32 masters) opens shaded by exact fraction with a legend naming it; a healthy
// checkpoint keeps the param colours.
#include <QComboBox>
#include <QImage>
#include <QLabel>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <map>
#include <set>

#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "damage_support.h"
#include "findings_model.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "layout_map.h"
#include "layout_view.h"
#include "main_window.h"
#include "overview_view.h"
#include "param_strip.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

constexpr int kRanks = 64, kStale = 37;

// Colours sampled in the middle of every fragment at least 3 pixels wide, per rank.
std::map<int, std::set<QRgb>> fragmentColours(const LayoutMap& map, const QImage& img) {
  std::map<int, std::set<QRgb>> out;
  const auto& g = *map.group();
  const auto& geo = map.geometry();
  for (int r = 0; r < static_cast<int>(g.partitions.size()); ++r)
    for (const auto& f : g.partitions[static_cast<size_t>(r)].fragments) {
      const double x0 = geo.x_of(static_cast<double>(f.partition_offset));
      const double x1 = geo.x_of(static_cast<double>(f.partition_offset + f.numel));
      if (x1 - x0 < 3) continue;
      const int x = static_cast<int>((x0 + x1) / 2);
      const int y = static_cast<int>(geo.row_top(r) + geo.row_height / 2);
      if (x < 0 || x >= img.width() || y < 0 || y >= img.height()) continue;
      out[r].insert(img.pixel(x, y));
    }
  return out;
}

void expectStaleRankStandsOut(const std::map<int, std::set<QRgb>>& colours) {
  QCOMPARE(static_cast<int>(colours.size()), kRanks);
  std::set<QRgb> others;
  for (const auto& [rank, set] : colours)
    if (rank != kStale) others.insert(set.begin(), set.end());
  QVERIFY(!colours.at(kStale).empty());
  for (QRgb c : colours.at(kStale))
    QVERIFY2(!others.count(c),
             qPrintable(QString("rank %1's colour %2 is also another rank's").arg(kStale).arg(c, 8, 16)));
  QCOMPARE(others.size(), size_t{1});  // every healthy rank is the same "exact" green
}

// The map's picture once the job making it has landed (the first grab asks for it).
QImage settledGrab(LayoutMap* map) {
  map->grab();
  for (int i = 0; i < 600 && !map->pictureCurrent(); ++i) QTest::qWait(50);
  return map->grab().toImage();
}

}  // namespace

class TestLayoutHealth : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    ckpt_ = dir_.file("dp64");
    const auto r =
        test::run_cli({"repair", test::healthy_fixture("zero2_fp16_ws2"), "-o", ckpt_, "--repartition",
                       "--world-size", std::to_string(kRanks), "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    test::replace_fp32_masters_with_noise(test::optim_file_of(ckpt_ + "/global_step5", kStale), 11);
  }

  void oneStaleRankAmong64() {
    MainWindow w;
    w.resize(1200, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QSignalSpy done(w.session(), &Session::analysisFinished);
    w.openPath(QString::fromStdString(ckpt_), true);
    QVERIFY(done.wait(120000));
    // The diagnosis names that rank, and only it.
    const auto* findings = w.findingsModel();
    int row = -1;
    for (int i = 0; i < findings->count(); ++i)
      if (findings->finding(i).code == "fp32-master-mismatch") row = i;
    QVERIFY(row >= 0);
    QCOMPARE(findings->finding(row).ranks, std::vector<int>{kStale});

    w.showTab("layout");
    auto* view = w.layoutView();
    view->setGroupIndex(0);  // the worst param, selected on open, may have switched to its group
    auto* map = view->map();
    QVERIFY(map->group());
    QCOMPARE(static_cast<int>(map->group()->partitions.size()), kRanks);
    auto* shade = view->shadeSelector();
    shade->setCurrentIndex(shade->findData(static_cast<int>(session::Shade::ExactFraction)));
    QCOMPARE(map->shade(), session::Shade::ExactFraction);
    map->fitToWidth();
    QVERIFY(map->geometry().row_height >= 2);
    QVERIFY(!map->pictureCurrent());  // made by a job: not yet
    expectStaleRankStandsOut(fragmentColours(*map, settledGrab(map)));
    QVERIFY(map->pictureCurrent());

    // Shaded by param instead, the stale rank is no different: the colour above came from its health.
    shade->setCurrentIndex(shade->findData(static_cast<int>(session::Shade::Param)));
    const auto byParam = fragmentColours(*map, settledGrab(map));
    std::set<QRgb> all;
    for (const auto& [rank, set] : byParam) all.insert(set.begin(), set.end());
    QVERIFY(all.size() > 2);

    // The strip's divergence lane: not "exact" green exactly over the params with a fragment on the stale
    // rank.
    std::set<std::string> onStale;
    for (const auto& g : w.session()->catalog()->groups)
      for (const auto& f : g.partitions[kStale].fragments)
        onStale.insert(g.params[static_cast<size_t>(f.param)].name);
    const QColor exact = rgbaColor(session::shade_rgba(session::Shade::ExactFraction, 0, false));
    auto* strip = w.overview()->strip();
    w.showTab("overview");
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    std::set<std::string> flagged;
    for (int x = strip->stripLeft(); x < strip->width() - 4; ++x) {
      const QString p = strip->paramAt(x);
      if (p.isEmpty()) continue;
      const bool off = strip->colourAt(0, x) != exact;
      if (off) flagged.insert(p.toStdString());
      QVERIFY2(off == (onStale.count(p.toStdString()) > 0), qPrintable(p));
    }
    QVERIFY(flagged == onStale);
  }

  // The demo's worst finding is fp32-master-mismatch: the map opens shaded by its metric, and says so.
  void demoOpensShadedByItsWorstFinding() {
    test::TempDir dir;
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", dir.file("demo")}), 0);
    MainWindow w;
    w.resize(1200, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QSignalSpy done(w.session(), &Session::analysisFinished);
    w.openPath(QString::fromStdString(dir.file("demo")), true);
    QVERIFY(done.wait(120000));
    QCOMPARE(w.session()->core().findings().front().code, std::string("fp32-master-mismatch"));
    w.showTab("layout");
    auto* view = w.layoutView();
    QCOMPARE(view->map()->shade(), session::Shade::ExactFraction);
    QCOMPARE(view->shadeSelector()->currentData().toInt(), static_cast<int>(session::Shade::ExactFraction));
    QVERIFY(view->legend()->isVisible());
    QVERIFY2(view->legend()->text().contains("Exact fraction"), qPrintable(view->legend()->text()));
    // Every fragment of the demo is stale: the map is the legend's "all off" red, nowhere "all exact" green
    // (shaded by param, neither colour would be there).
    const QRgb allOff = rgbaColor(session::shade_rgba(session::Shade::ExactFraction, 1, false)).rgb();
    const QRgb exact = rgbaColor(session::shade_rgba(session::Shade::ExactFraction, 0, false)).rgb();
    auto count = [&](QRgb colour) {
      const QImage img = settledGrab(view->map());
      const auto& geo = view->map()->geometry();
      int n = 0;
      for (int y = static_cast<int>(geo.header_height); y < img.height(); ++y)
        for (int x = static_cast<int>(geo.label_width) + 1; x < img.width(); ++x)
          n += (img.pixel(x, y) | 0xFF000000u) == colour;
      return n;
    };
    QVERIFY2(count(allOff) > 10000, qPrintable(QString::number(count(allOff))));
    QCOMPARE(count(exact), 0);
    auto* shade = view->shadeSelector();
    shade->setCurrentIndex(shade->findData(static_cast<int>(session::Shade::Param)));
    QCOMPARE(count(allOff), 0);  // the red came from the shading
    // The overview strip says what its lanes' colours mean.
    auto* strip = w.overview()->findChild<QLabel*>(QStringLiteral("stripLegend"));
    QVERIFY(strip);
    QVERIFY2(strip->text().contains("Moment magnitude"), qPrintable(strip->text()));
    // Its moments lane: the demo's moments are healthy (within a few percent of each other), so one colour
    // near the middle of the ramp, not a rainbow.
    w.showTab("overview");
    const QColor mid = rgbaColor(session::shade_rgba(session::Shade::MomentMagnitude, 0.5f, false));
    auto* lane = w.overview()->strip();
    for (int x = lane->stripLeft(); x < lane->width() - 4; ++x) {
      const QColor c = lane->colourAt(1, x);
      QVERIFY2(std::abs(c.red() - mid.red()) + std::abs(c.green() - mid.green()) +
                       std::abs(c.blue() - mid.blue()) <
                   60,
               qPrintable(c.name() + " at " + QString::number(x)));
    }
  }

  // Nothing wrong: the param colours stay, and the legend says that is what they are.
  void healthyCheckpointKeepsParamShading() {
    MainWindow w;
    w.resize(1200, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QSignalSpy done(w.session(), &Session::analysisFinished);
    w.openPath(QString::fromStdString(test::healthy_fixture("zero2_fp16_ws2")), true);
    QVERIFY(done.wait(120000));
    QVERIFY(!w.session()->report()->has_error());
    w.showTab("layout");
    auto* view = w.layoutView();
    QCOMPARE(view->map()->shade(), session::Shade::Param);
    QVERIFY2(view->legend()->text().contains("Param"), qPrintable(view->legend()->text()));
  }

  // A shade picked in the menu stays when the analysis runs again.
  void chosenShadeSurvivesReanalysis() {
    test::TempDir dir;
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", dir.file("demo")}), 0);
    MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QSignalSpy done(w.session(), &Session::analysisFinished);
    w.openPath(QString::fromStdString(dir.file("demo")), true);
    QVERIFY(done.wait(120000));
    auto* shade = w.layoutView()->shadeSelector();
    const int moments = shade->findData(static_cast<int>(session::Shade::MomentMagnitude));
    shade->setCurrentIndex(moments);
    emit shade->activated(moments);  // as a user's pick
    w.session()->analyse();
    QVERIFY(done.wait(120000));
    QCOMPARE(w.layoutView()->map()->shade(), session::Shade::MomentMagnitude);
  }

  // 64 ranks in 70 pixel rows of a small map: ranks share rows, the stale one still shows.
  void staleRankVisibleInThinRows() {
    auto ckpt = deepspeed::Checkpoint::open(ckpt_);
    Session s;
    s.core().settings().device = DeviceKind::Cpu;
    QSignalSpy done(&s, &Session::analysisFinished);
    s.open(QString::fromStdString(ckpt_));
    QVERIFY(done.wait(120000));
    LayoutMap map;
    map.resize(900, 100);
    map.setGroup(s.sharedCatalog(), &s.catalog()->groups[0]);
    map.setHealth(s.core().health_ptr());
    map.setShade(session::Shade::ExactFraction);
    map.fitToWidth();
    QVERIFY(map.geometry().pitch() < 1.5);
    const QImage img = map.grab().toImage();
    const auto& geo = map.geometry();
    const int staleRow = static_cast<int>(std::floor(geo.row_top(kStale)));
    int red = 0, redElsewhere = 0;
    for (int y = static_cast<int>(geo.header_height); y < img.height(); ++y)
      for (int x = static_cast<int>(geo.label_width) + 1; x < img.width(); ++x) {
        const QColor c = img.pixelColor(x, y);
        if (c.red() > 180 && c.green() < 90) (std::abs(y - staleRow) <= 1 ? red : redElsewhere)++;
      }
    QVERIFY2(red > 100, qPrintable(QString::number(red)));
    QCOMPARE(redElsewhere, 0);
  }

 private:
  test::TempDir dir_;
  std::string ckpt_;
};

CKPTDOC_TEST_MAIN_WIDGETS(TestLayoutHealth)
#include "test_layout_health.moc"
