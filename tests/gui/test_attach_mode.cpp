// Attach mode end to end on snapshots that tests/fixtures/make_snapshot.py builds from the committed real
// DeepSpeed checkpoints (manifest written last): attaching to a folder shows its snapshot like an opened
// checkpoint with one point on the Timeline tab; a snapshot committed later is picked up from the file-system
// event (we wait on the signal, never on a clock) and becomes the shown source, with its live numbers on the
// timeline; deleting the shown snapshot leaves the last analysis on screen with a message; a folder that is
// not one ends the attach with a message; a re-dumped tag keeps one row; a folder that already holds several
// snapshots is delivered (and the views refreshed) once.
#include <QAbstractItemModelTester>
#include <QChart>
#include <QComboBox>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QXYSeries>
#include <QtTest>
#include <filesystem>

#include "app.h"
#include "chart_panel.h"
#include "findings_model.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "layout_map.h"
#include "layout_view.h"
#include "main_window.h"
#include "param_table_model.h"
#include "session.h"
#include "timeline_model.h"
#include "timeline_view.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;
namespace fs = std::filesystem;

namespace {

constexpr int kWaitMs = 180000;  // generous: a slow CI machine; never a timed assertion

void makeSnapshot(const std::string& out, const std::vector<std::string>& args) {
  if (!test::make_snapshot(out, args)) QFAIL("make_snapshot.py failed");
}

QVariant cell(const TimelineModel& m, int row, int column) {
  return m.data(m.index(row, column), TimelineModel::SortRole);
}

// Points of the named line series of a chart panel.
int seriesPoints(ChartPanel* panel, const QString& name) {
  if (!panel->chart()) return -1;
  for (auto* s : panel->chart()->series())
    if (s->name() == name)
      if (auto* xy = qobject_cast<QXYSeries*>(s)) return static_cast<int>(xy->count());
  return -1;
}

}  // namespace

class TestAttachMode : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void attachFollowsTheRunAndSurvivesADeletion() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    fs::create_directories(run);
    makeSnapshot(run + "/step5", {"--step", "5"});

    MainWindow w;
    w.session()->core().settings().device = DeviceKind::Cpu;
    auto* model = w.timelineView()->model();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy sampled(w.session(), &Session::watchSampled);
    QSignalSpy removed(w.session(), &Session::snapshotRemoved);
    w.show();
    w.attach(QString::fromStdString(run));
    QVERIFY(w.session()->isAttached());

    // the snapshot already there: shown like an opened, analysed checkpoint, and one point on the timeline
    QVERIFY(sampled.wait(kWaitMs));
    QCOMPARE(model->rowCount(), 1);
    QCOMPARE(cell(*model, 0, TimelineModel::Step).toLongLong(), 5LL);
    QVERIFY(w.session()->isOpen());
    QCOMPARE(fs::path(w.session()->path().toStdString()).filename().string(), std::string("step5"));
    QVERIFY(w.session()->report() != nullptr);
    QVERIFY(w.paramModel()->rowCount() > 0);
    QVERIFY(w.paramModel()->paramReport(0) != nullptr);  // the table has the analysis' numbers
    QCOMPARE(cell(*model, 0, TimelineModel::LossScale).toDouble(), 256.0);
    QCOMPARE(seriesPoints(w.timelineView()->exactChart(), QStringLiteral("exact")), 1);
    QVERIFY(w.timelineView()->notice().contains(QStringLiteral("step5")));

    // a second snapshot, committed while attached (its manifest last), with other live numbers
    makeSnapshot(run + "/step9", {"--step", "9", "--live", R"({"grad_norm": 2.5, "loss_scale": 128.0})"});
    while (w.session()->samples().size() < 2)
      QVERIFY2(sampled.wait(kWaitMs), "the second snapshot never arrived");
    QCOMPARE(model->rowCount(), 2);
    QCOMPARE(cell(*model, 0, TimelineModel::Step).toLongLong(), 5LL);
    QCOMPARE(cell(*model, 1, TimelineModel::Step).toLongLong(), 9LL);
    QCOMPARE(cell(*model, 1, TimelineModel::GradNorm).toDouble(), 2.5);
    QCOMPARE(cell(*model, 1, TimelineModel::LossScale).toDouble(), 128.0);
    QCOMPARE(fs::path(w.session()->path().toStdString()).filename().string(), std::string("step9"));
    QVERIFY(w.session()->report()->live);
    QCOMPARE(w.session()->report()->live->global_steps, int64_t{9});
    QVERIFY(w.session()->report() != nullptr);
    QCOMPARE(seriesPoints(w.timelineView()->gradNormChart(), QStringLiteral("grad norm")), 2);
    QCOMPARE(seriesPoints(w.timelineView()->lossScaleChart(), QStringLiteral("loss scale")), 2);

    // the selected param's divergence over time: one point per snapshot, from the samples' per-param numbers
    const QString param =
        w.paramModel()->data(w.paramModel()->index(0, ParamTableModel::Name), Qt::DisplayRole).toString();
    w.selectParam(param);
    QCOMPARE(w.timelineView()->selectedParam(), param);
    QCOMPARE(seriesPoints(w.timelineView()->paramChart(), QStringLiteral("exact fraction (%)")), 2);
    QCOMPARE(seriesPoints(w.timelineView()->paramChart(), QStringLiteral("max |fp32 − lp|")), 2);
    const auto& pts = w.session()->samples().back().summary.params;
    QVERIFY(pts.count(param.toStdString()));
    QCOMPARE(pts.at(param.toStdString()).exact_fraction, 1.0);  // a healthy checkpoint's pair agrees

    // the shown snapshot is deleted: no crash, a message, the last analysis stays
    const int rowsBefore = w.paramModel()->rowCount();
    const size_t findingsBefore = static_cast<size_t>(w.findingsModel()->count());
    fs::remove_all(run + "/step9");
    QVERIFY(removed.wait(kWaitMs));
    QCOMPARE(removed.last().at(1).toBool(), true);  // the one shown
    QVERIFY2(w.timelineView()->notice().contains(QStringLiteral("deleted")),
             qPrintable(w.timelineView()->notice()));
    QVERIFY(w.session()->isOpen());
    QVERIFY(w.session()->report() != nullptr);
    QCOMPARE(w.paramModel()->rowCount(), rowsBefore);
    QCOMPARE(static_cast<size_t>(w.findingsModel()->count()), findingsBefore);
    QCOMPARE(model->rowCount(), 2);  // its point stays, marked
    QCOMPARE(model->data(model->index(1, TimelineModel::State), Qt::DisplayRole).toString(),
             QStringLiteral("deleted"));
    for (const char* tab : {"overview", "layout", "params", "timeline"}) {
      w.showTab(QString::fromLatin1(tab));
      QCoreApplication::processEvents();
    }
    QVERIFY(w.session()->isAttached());

    // still following: a third snapshot arrives and is shown
    makeSnapshot(run + "/step12", {"--step", "12"});
    while (w.session()->samples().size() < 3)
      QVERIFY2(sampled.wait(kWaitMs), "the third snapshot never arrived");
    QCOMPARE(model->rowCount(), 3);
    QCOMPARE(cell(*model, 2, TimelineModel::Step).toLongLong(), 12LL);
    QCOMPARE(fs::path(w.session()->path().toStdString()).filename().string(), std::string("step12"));

    // opening something else ends the attach
    QSignalSpy ended(w.session(), &Session::attachEnded);
    QSignalSpy analysed(w.session(), &Session::analysisFinished);
    w.openPath(QString::fromStdString(test::deepspeed_fixture("zero1_fp16_ws2") + "/checkpoint"), true);
    QVERIFY(ended.wait(kWaitMs));
    QVERIFY(!w.session()->isAttached());
    QVERIFY(analysed.count() > 0 || analysed.wait(kWaitMs));
    QCOMPARE(model->rowCount(), 0);
  }

  // The hook re-dumping a tag (manifest removed first, then the folder rewritten and a new manifest renamed
  // in): the Timeline keeps one row for that snapshot, with the newest numbers and no "deleted" mark.
  void aRedumpedSnapshotReplacesItsRow() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    fs::create_directories(run);
    makeSnapshot(run + "/step5", {"--step", "5"});

    MainWindow w;
    w.session()->core().settings().device = DeviceKind::Cpu;
    auto* model = w.timelineView()->model();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy sampled(w.session(), &Session::watchSampled);
    QSignalSpy removed(w.session(), &Session::snapshotRemoved);
    w.attach(QString::fromStdString(run));
    QVERIFY(sampled.wait(kWaitMs));
    QCOMPARE(model->rowCount(), 1);

    fs::remove(run + "/step5/manifest.json");  // what dump() does first to an existing tag
    QVERIFY(removed.wait(kWaitMs));
    makeSnapshot(run + "/step5", {"--step", "5", "--live", R"({"grad_norm": 2.5, "loss_scale": 128.0})"});
    while (sampled.count() < 2) QVERIFY2(sampled.wait(kWaitMs), "the re-dumped snapshot never arrived");
    QCOMPARE(model->rowCount(), 1);
    QCOMPARE(cell(*model, 0, TimelineModel::Step).toLongLong(), 5LL);
    QCOMPARE(cell(*model, 0, TimelineModel::GradNorm).toDouble(), 2.5);
    QCOMPARE(cell(*model, 0, TimelineModel::LossScale).toDouble(), 128.0);
    QCOMPARE(model->data(model->index(0, TimelineModel::State), Qt::DisplayRole).toString(), QString());
    QCOMPARE(seriesPoints(w.timelineView()->gradNormChart(), QStringLiteral("grad norm")), 1);
    QCOMPARE(w.session()->samples().size(), size_t{1});
    QCOMPARE(fs::path(w.session()->path().toStdString()).filename().string(), std::string("step5"));
    QVERIFY(w.session()->isAttached());
  }

  // A shade picked while following a run stays when the next snapshot arrives (each one is opened anew).
  void aChosenShadeSurvivesTheNextSnapshot() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    fs::create_directories(run);
    makeSnapshot(run + "/step5", {"--step", "5"});
    MainWindow w;
    w.session()->core().settings().device = DeviceKind::Cpu;
    QSignalSpy sampled(w.session(), &Session::watchSampled);
    w.attach(QString::fromStdString(run));
    QVERIFY(sampled.wait(kWaitMs));
    auto* shade = w.layoutView()->shadeSelector();
    const int moments = shade->findData(static_cast<int>(session::Shade::MomentMagnitude));
    shade->setCurrentIndex(moments);
    emit shade->activated(moments);  // as a user's pick
    makeSnapshot(run + "/step9", {"--step", "9"});
    while (w.session()->samples().size() < 2)
      QVERIFY2(sampled.wait(kWaitMs), "the second snapshot never arrived");
    QCOMPARE(fs::path(w.session()->path().toStdString()).filename().string(), std::string("step9"));
    QCOMPARE(w.layoutView()->map()->shade(), session::Shade::MomentMagnitude);
  }

  // Attaching to a folder that already holds several snapshots refreshes the views once, not once per
  // snapshot: one watchSampled, one timeline model reset, the newest shown once.
  void attachingToAFolderOfSnapshotsRefreshesOnce() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    fs::create_directories(run);
    for (const char* step : {"5", "9", "12"}) makeSnapshot(run + "/step" + step, {"--step", step});

    MainWindow w;
    w.session()->core().settings().device = DeviceKind::Cpu;
    auto* model = w.timelineView()->model();
    QSignalSpy resets(model, &QAbstractItemModel::modelReset);
    QSignalSpy sampled(w.session(), &Session::watchSampled);
    QSignalSpy opened(w.session(), &Session::opened);
    QSignalSpy analysed(w.session(), &Session::analysisFinished);
    w.attach(QString::fromStdString(run));
    while (w.session()->samples().size() < 3)
      QVERIFY2(sampled.wait(kWaitMs), "the snapshots already there never all arrived");
    QCOMPARE(sampled.count(), 1);
    QCOMPARE(resets.count(), 1);
    QCOMPARE(opened.count(), 1);
    QCOMPARE(analysed.count(), 1);
    QCOMPARE(model->rowCount(), 3);
    QCOMPARE(cell(*model, 2, TimelineModel::Step).toLongLong(), 12LL);
    QCOMPARE(fs::path(w.session()->path().toStdString()).filename().string(), std::string("step12"));
    QCOMPARE(seriesPoints(w.timelineView()->exactChart(), QStringLiteral("exact")), 3);
  }

  void attachToAMissingFolderSaysSo() {
    test::TempDir dir;
    MainWindow w;
    QSignalSpy ended(w.session(), &Session::attachEnded);
    w.attach(QString::fromStdString(dir.file("no-such-run")));
    QVERIFY(ended.wait(kWaitMs));
    QVERIFY(!ended.last().at(1).toString().isEmpty());
    QVERIFY2(w.timelineView()->notice().contains(QStringLiteral("not a folder")),
             qPrintable(w.timelineView()->notice()));
    QVERIFY(!w.session()->isOpen());
  }

  void parsesTheWatchOption() {
    const char* args[] = {"ckptdoc-gui", "--watch", "/runs/a", "--view", "timeline"};
    AppOptions o;
    std::string error;
    QVERIFY(parse_app_arguments(5, const_cast<char**>(args), o, error));
    QVERIFY(o.watch);
    QCOMPARE(*o.watch, std::string("/runs/a"));
    QCOMPARE(o.view, std::string("timeline"));
    QVERIFY(!o.path);
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestAttachMode)
#include "test_attach_mode.moc"
