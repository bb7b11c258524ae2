// The desktop app end to end on real DeepSpeed checkpoints: healthy fixtures show no error-level finding;
// a checkpoint with random fp32 masters shows fp32-master-mismatch, and Fix → Repair writes an output that
// diagnose calls clean; selection travels between the layout map and the table; analysis can be cancelled
// and superseded results are dropped.
#include <QAction>
#include <QAreaSeries>
#include <QChart>
#include <QCheckBox>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineSeries>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QValueAxis>
#include <QXYSeries>
#include <QtTest>

#include "app_settings.h"
#include "chart_panel.h"
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/human_bytes.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "findings_model.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "layout_map.h"
#include "layout_view.h"
#include "log_dock.h"
#include "main_window.h"
#include "overview_view.h"
#include "param_table_model.h"
#include "params_view.h"
#include "plots_view.h"
#include "repair_dialog.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

const char* kFixtures[] = {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2",
                           "bf16opt_zero1_ws2"};

bool openAndWait(MainWindow& w, const std::string& path) {
  QSignalSpy done(w.session(), &Session::analysisFinished);
  w.openPath(QString::fromStdString(path), true);
  return done.wait(120000);
}

int findingRow(const FindingsModel& m, const std::string& code) {
  for (int r = 0; r < m.count(); ++r)
    if (m.finding(r).code == code) return r;
  return -1;
}

// The Overview's summary rows as drawn: label -> value.
QMap<QString, QString> summaryRows(const MainWindow& w) {
  QMap<QString, QString> rows;
  const auto* summary = w.overview()->findChild<QLabel*>(QStringLiteral("overviewSummary"));
  if (!summary) return rows;
  static const QRegularExpression row(QStringLiteral("<tr><td[^>]*>([^<]*)</td><td>([^<]*)</td></tr>"));
  for (auto it = row.globalMatch(summary->text()); it.hasNext();) {
    const auto m = it.next();
    rows[m.captured(1)] = m.captured(2);
  }
  return rows;
}

QString codes(const FindingsModel& m) {
  QStringList out;
  for (int r = 0; r < m.count(); ++r) out << QString::fromStdString(m.finding(r).code);
  return out.join(", ");
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    AppSettings().clearRecentFiles();
    AppSettings().setDevice(DeviceKind::Cpu);
  }

  void healthyFixturesShowNoErrors() {
    for (const char* name : kFixtures) {
      MainWindow w;
      w.show();
      QVERIFY2(openAndWait(w, test::healthy_fixture(name)), name);
      const auto* m = w.findingsModel();
      for (int r = 0; r < m->count(); ++r)
        QVERIFY2(m->finding(r).severity != analysis::Severity::Error,
                 qPrintable(QString("%1: %2").arg(name, codes(*m))));
      QCOMPARE(w.paramModel()->rowCount(), 8);
      QVERIFY(!w.progressBar()->isVisible());
      QVERIFY(!w.overview()->findChild<QPushButton*>("fixButton_fp32-master-mismatch"));
    }
  }

  // The Overview and Layout tab say what the files record: the ZeRO stage and DeepSpeed version the real
  // engine reported when it saved the fixture (engine_truth.json, written in the training run), the tag,
  // and the tag folder's files and bytes as the file system counts them.
  void overviewSaysWhatTheFilesRecord() {
    for (const char* name : kFixtures) {
      MainWindow w;
      w.show();
      QVERIFY2(openAndWait(w, test::healthy_fixture(name)), name);
      QFile truthFile(QString::fromStdString(test::deepspeed_fixture(name) + "/engine_truth.json"));
      QVERIFY2(truthFile.open(QIODevice::ReadOnly), name);
      const QJsonObject truth = QJsonDocument::fromJson(truthFile.readAll()).object();
      const QString tag = truth["tag"].toString();
      const QString stage = QStringLiteral("ZeRO stage %1").arg(truth["zero_stage"].toInt());
      const QString version = truth["versions"].toObject()["deepspeed"].toString();
      QVERIFY2(!tag.isEmpty() && !version.isEmpty(), name);

      const auto rows = summaryRows(w);
      QCOMPARE(rows.value(QStringLiteral("Tag")), tag);
      QVERIFY2(rows.value(QStringLiteral("Optimizer")).contains(stage + QStringLiteral(" (")) ||
                   rows.value(QStringLiteral("Optimizer")).endsWith(stage),
               qPrintable(QStringLiteral("%1: %2").arg(name, rows.value(QStringLiteral("Optimizer")))));
      QCOMPARE(rows.value(QStringLiteral("DeepSpeed")), version);
      const QFileInfoList files =
          QDir(QString::fromStdString(test::healthy_fixture(name)) + "/" + tag).entryInfoList(QDir::Files);
      uint64_t bytes = 0;
      for (const auto& f : files) bytes += static_cast<uint64_t>(f.size());
      QCOMPARE(
          rows.value(QStringLiteral("Files")),
          QStringLiteral("%1 files, %2").arg(files.size()).arg(QString::fromStdString(human_bytes(bytes))));

      w.showTab(QStringLiteral("layout"));
      const auto* info = w.layoutView()->findChild<QLabel*>(QStringLiteral("layoutInfo"));
      QVERIFY(info);
      QVERIFY2(info->text().startsWith(stage + QStringLiteral(" · ")), qPrintable(info->text()));
    }
  }

  void openRemembersRecentFileAndLogs() {
    MainWindow w;
    const auto path = test::healthy_fixture("zero1_fp16_ws2");
    QVERIFY(openAndWait(w, path));
    QCOMPARE(AppSettings().recentFiles().value(0),
             QFileInfo(QString::fromStdString(path)).absoluteFilePath());
    QTRY_VERIFY(w.logDock()->text().contains("opened"));
  }

  void openingGarbageFailsCleanly() {
    MainWindow w;
    test::TempDir dir;
    test::write_text(dir.file("not-a-checkpoint.pt"), "hello");
    QSignalSpy failed(w.session(), &Session::openFailed);
    w.openPath(QString::fromStdString(dir.file("not-a-checkpoint.pt")), true);
    QVERIFY(failed.wait(30000));
    QVERIFY(!failed.first().at(1).toString().isEmpty());
    QVERIFY(!w.session()->isOpen());
    QVERIFY(!w.progressBar()->isVisible());
  }

  void staleMastersShowMismatchAndFixRepairsThem() {
    test::TempDir dir;
    const std::string broken = test::make_stale_masters_checkpoint(dir);
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, broken));
    const int row = findingRow(*w.findingsModel(), "fp32-master-mismatch");
    QVERIFY2(row >= 0, qPrintable(codes(*w.findingsModel())));
    QCOMPARE(w.findingsModel()->finding(row).severity, analysis::Severity::Error);

    auto* fix = w.overview()->findChild<QPushButton*>("fixButton_fp32-master-mismatch");
    QVERIFY(fix);
    QTest::mouseClick(fix, Qt::LeftButton);
    auto* dialog = w.findChild<RepairDialog*>();
    QVERIFY(dialog);
    QVERIFY(dialog->output().endsWith("zero2_fp16_ws2-fixed"));
    QVERIFY(dialog->request().refresh_fp32);
    const QString out = QString::fromStdString(dir.file("repaired"));
    QSignalSpy planned(dialog, &RepairDialog::planReady);
    dialog->setOutput(out);
    QVERIFY(planned.wait(30000));
    QTRY_VERIFY(!dialog->planning());
    QVERIFY2(dialog->planValid(), qPrintable(dialog->planText()));
    QVERIFY(!dialog->planText().isEmpty());
    QSignalSpy finished(dialog, &RepairDialog::repairFinished);
    QTest::mouseClick(dialog->runButton(), Qt::LeftButton);  // the confirm
    QVERIFY(finished.wait(180000));
    QVERIFY(dialog->result());
    QVERIFY(finished.first().first().toBool());
    QVERIFY(dialog->result()->verified_clean);
    QVERIFY(dialog->result()->invariant_failures.empty());

    // The output is clean by core's own diagnosis, and the input was not touched.
    analysis::DiagnoseOptions o;
    o.device = DeviceKind::Cpu;
    const auto fixed = deepspeed::diagnose(*deepspeed::Checkpoint::open(out.toStdString()), o);
    QVERIFY(!fixed.has_error());
    const auto still = deepspeed::diagnose(*deepspeed::Checkpoint::open(broken), o);
    QVERIFY(still.has_error());
  }

  // Checkpoint > Repair… without a finding: the user picks reset-optimizer + refresh-fp32, the plan names
  // both, and the output diagnoses clean.
  void repairMenuRunsTheChosenActions() {
    test::TempDir dir;
    const std::string broken = test::make_stale_masters_checkpoint(dir);
    MainWindow w;
    w.show();
    auto* repair = w.findChild<QAction*>("repairAction");
    QVERIFY(repair);
    QVERIFY(!repair->isEnabled());  // nothing open
    QVERIFY(openAndWait(w, broken));
    QVERIFY(repair->isEnabled());
    repair->trigger();
    auto* dialog = w.findChild<RepairDialog*>();
    QVERIFY(dialog);
    QTRY_VERIFY_WITH_TIMEOUT(!dialog->planning(), 30000);
    QVERIFY(!dialog->planValid());  // nothing chosen yet: the planner's refusal, not a plan
    const QString out = QString::fromStdString(dir.file("repaired"));
    dialog->setOutput(out);
    auto* reset = dialog->findChild<QCheckBox*>("repairResetOptimizer");
    QVERIFY(reset);
    QTest::mouseClick(reset, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!dialog->planning(), 30000);
    QVERIFY2(dialog->planValid(), qPrintable(dialog->planText()));
    // Reset alone leaves the stale masters, and the plan says so before anything is written.
    QVERIFY2(dialog->planText().contains("fp32-master-mismatch"), qPrintable(dialog->planText()));
    auto* refresh = dialog->findChild<QCheckBox*>("repairRefreshFp32");
    QVERIFY(refresh);
    QTest::mouseClick(refresh, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!dialog->planning(), 30000);
    QVERIFY2(dialog->planValid(), qPrintable(dialog->planText()));
    QVERIFY(dialog->request().refresh_fp32 && dialog->request().reset_optimizer);
    QVERIFY2(dialog->planText().contains("refresh fp32 masters") &&
                 dialog->planText().contains("reset the optimizer") &&
                 !dialog->planText().contains("fp32-master-mismatch"),
             qPrintable(dialog->planText()));
    QSignalSpy finished(dialog, &RepairDialog::repairFinished);
    QTest::mouseClick(dialog->runButton(), Qt::LeftButton);
    QVERIFY(finished.wait(180000));
    QVERIFY(finished.first().first().toBool());

    // The output re-opens clean in the window, with its optimizer reset.
    auto* reopen = dialog->findChild<QPushButton*>("openRepairedButton");
    QVERIFY(reopen && reopen->isVisible());
    QSignalSpy analysed(w.session(), &Session::analysisFinished);
    QTest::mouseClick(reopen, Qt::LeftButton);
    QVERIFY(analysed.wait(120000));
    QVERIFY(w.session()->path().startsWith(out));
    QVERIFY(!w.session()->report()->has_error());
  }

  // Analysis > Compare with 16-bit weights… (diagnose --lp-source): offered for ZeRO-3 only; a save with one
  // tensor scaled is named by lp-source-mismatch, DeepSpeed's own consolidated weights compare clean.
  void zero3ComparedWithSixteenBitWeightsSavedElsewhere() {
    test::TempDir dir;
    const std::string fixture = test::deepspeed_fixture("zero3_fp16_ws2");
    const std::string good = dir.file("good.bin"), stale = dir.file("stale.bin");
    auto recast = [&](const std::string& out, std::vector<std::string> extra) {
      std::vector<std::string> args{fixture + "/checkpoint.zero_to_fp32.bin", out, "--dtype", "float16"};
      args.insert(args.end(), extra.begin(), extra.end());
      const auto r = test::run_python(test::script("fixtures/recast_state_dict.py"), args);
      return r.exit_code == 0 ? std::string() : r.err;
    };
    const std::string e1 = recast(good, {}), e2 = recast(stale, {"--scale", "fc2.weight=1.01"});
    QVERIFY2(e1.empty() && e2.empty(), (e1 + e2).c_str());

    MainWindow w;
    w.show();
    auto* lp = w.findChild<QAction*>("lpSourceAction");
    QVERIFY(lp);
    QVERIFY(openAndWait(w, test::healthy_fixture("zero2_fp16_ws2")));
    QVERIFY(!lp->isEnabled());  // ZeRO-1/2 keep their own 16-bit weights
    QVERIFY(openAndWait(w, fixture + "/checkpoint"));
    QVERIFY(lp->isEnabled());
    QCOMPARE(findingRow(*w.findingsModel(), "lp-source-mismatch"), -1);

    QSignalSpy analysed(w.session(), &Session::analysisFinished);
    w.compareWithLpWeights(QString::fromStdString(stale));
    QVERIFY(analysed.wait(120000));
    const int row = findingRow(*w.findingsModel(), "lp-source-mismatch");
    QVERIFY2(row >= 0, qPrintable(codes(*w.findingsModel())));
    QCOMPARE(w.findingsModel()->finding(row).params, std::vector<std::string>{"fc2.weight"});

    analysed.clear();
    w.compareWithLpWeights(QString::fromStdString(good));
    QVERIFY(analysed.wait(120000));
    QVERIFY2(findingRow(*w.findingsModel(), "lp-source-compared") >= 0,
             qPrintable(codes(*w.findingsModel())));
    QCOMPARE(findingRow(*w.findingsModel(), "lp-source-mismatch"), -1);
  }

  // Analysis > Verify checksums: off, a flipped bit in a rank file goes unseen; on, the re-analysis names it;
  // the choice is remembered for the next window.
  void verifyChecksumsMenuFindsFlippedBit() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", ckpt);
    test::flip_bits_in_first_data_record(ckpt + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt", 64,
                                         0x01);
    AppSettings().setVerifyChecksums(false);
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, ckpt));
    QCOMPARE(findingRow(*w.findingsModel(), "checksum-mismatch"), -1);
    QAction* toggle = nullptr;
    for (QAction* a : w.findChildren<QAction*>())
      if (a->text() == "Verify &checksums") toggle = a;
    QVERIFY(toggle);
    QVERIFY(!toggle->isChecked());
    toggle->trigger();
    QVERIFY(w.session()->verifyChecksums());
    QSignalSpy done(w.session(), &Session::analysisFinished);
    QTest::keyClick(&w, Qt::Key_F5);
    QVERIFY(done.wait(120000));
    const int row = findingRow(*w.findingsModel(), "checksum-mismatch");
    QVERIFY2(row >= 0, qPrintable(codes(*w.findingsModel())));
    QCOMPARE(w.findingsModel()->finding(row).ranks, std::vector<int>{1});
    QVERIFY(AppSettings().verifyChecksums());
    MainWindow again;
    QVERIFY(again.session()->verifyChecksums());
    toggle->trigger();
    QVERIFY(!AppSettings().verifyChecksums());
  }

  void layoutClickSelectsParamInTable() {
    MainWindow w;
    w.resize(1200, 800);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(openAndWait(w, test::healthy_fixture("zero2_fp16_ws2")));
    w.showTab("layout");
    auto* map = w.layoutView()->map();
    QVERIFY(map->group());
    map->fitToWidth();
    const auto& g = *map->group();
    const auto& frag = g.partitions.at(1).fragments.at(0);
    const auto& geo = map->geometry();
    const QPointF pixel(
        geo.x_of(static_cast<double>(frag.partition_offset) + static_cast<double>(frag.numel) / 2.0),
        geo.row_top(1) + geo.row_height / 2.0);
    const auto hit = hitTest(g, geo, pixel);
    QVERIFY(hit);
    QCOMPARE(hit->rank, 1);
    QCOMPARE(hit->param, frag.param);
    QTest::mouseClick(map, Qt::LeftButton, {}, pixel.toPoint());
    const QString name = QString::fromStdString(g.params.at(static_cast<size_t>(frag.param)).name);
    QCOMPARE(w.paramsView()->plots()->currentParam(), name);
    const QModelIndex current = w.paramsView()->table()->currentIndex();
    QCOMPARE(current.data(ParamTableModel::NameRole).toString(), name);
    // And back: selecting in the table highlights the param on the map.
    const QString other = w.paramModel()->index(0, 0).data(ParamTableModel::NameRole).toString();
    w.paramsView()->selectParam(other);
    QCOMPARE(w.paramsView()->plots()->currentParam(), other);
  }

  // Without a click the Params tab shows the worst param's plots, not five empty ones.
  void paramsOpenOnTheWorstParam() {
    test::TempDir dir;
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", dir.file("demo")}), 0);
    MainWindow w;
    w.resize(1200, 800);
    w.show();
    auto* plots = w.paramsView()->plots();
    QSignalSpy density(plots, &PlotsView::densityReady);
    QVERIFY(openAndWait(w, dir.file("demo")));
    const QString worst = QString::fromStdString(w.session()->core().worst_param());
    QVERIFY(!worst.isEmpty());
    QCOMPARE(plots->currentParam(), worst);
    QCOMPARE(w.paramsView()->table()->currentIndex().data(ParamTableModel::NameRole).toString(), worst);
    QVERIFY(density.wait(30000));
    for (auto* panel : plots->panels()) {  // each has data: more than emptyChart's one empty series
      QVERIFY(panel->chart());
      int points = 0;
      for (auto* s : panel->chart()->series())
        if (auto* xy = qobject_cast<QXYSeries*>(s))
          points += static_cast<int>(xy->count());
        else
          points += 1;  // bars
      QVERIFY2(points > 0, qPrintable(panel->chart()->title()));
    }
  }

  // A checkpoint without optimizer state (DeepSpeed 0.18.4, bf16, ZeRO stage 0): its weights are read but
  // have no master, and the Params tab showed six empty plots. The first shows the weight's own values.
  void weightsWithoutMastersShowTheirValues() {
    MainWindow w;
    w.resize(1200, 800);
    w.show();
    QVERIFY(openAndWait(w, test::deepspeed_fixture("v0184_bf16_z0_ws2") + "/checkpoint"));
    auto* plots = w.paramsView()->plots();
    w.paramsView()->selectParam(QStringLiteral("fc1.weight"));
    QChart* values = plots->panels()[0]->chart();
    QVERIFY(values);
    QCOMPARE(values->title(), QStringLiteral("weight values"));
    qreal tallest = 0;  // the histogram of fc1.weight's values has bars
    for (auto* s : values->series())
      if (auto* area = qobject_cast<QAreaSeries*>(s); area && s->name() == QStringLiteral("all"))
        for (const QPointF& p : area->upperSeries()->points()) tallest = std::max(tallest, p.y());
    QVERIFY2(tallest > 0, "the histogram has no bar");
  }

  void plotsExportPngAndSvg() {
    MainWindow w;
    w.resize(1200, 800);
    w.show();
    QVERIFY(openAndWait(w, test::healthy_fixture("zero2_bf16_ws2")));
    w.showTab("params");
    auto* plots = w.paramsView()->plots();
    QSignalSpy density(plots, &PlotsView::densityReady);
    w.paramsView()->selectParam(w.paramModel()->index(0, 0).data(ParamTableModel::NameRole).toString());
    QVERIFY(density.wait(30000));
    test::TempDir dir;
    QCOMPARE(plots->exportAll(QString::fromStdString(dir.path()), "png").size(), 6);
    const auto svgs = plots->exportAll(QString::fromStdString(dir.path()), "svg");
    QCOMPARE(svgs.size(), 6);
    QVERIFY(QString::fromStdString(test::read_text(svgs.first().toStdString())).contains("<svg"));
  }

  // The weight-vs-master density: a healthy param's bins lie on the diagonal; stale masters spread off it.
  void densityPlotSeparatesHealthyFromStale() {
    test::TempDir dir;
    const std::string stale = test::make_stale_masters_checkpoint(dir);
    for (const auto& [path, healthy] :
         {std::pair{test::healthy_fixture("zero2_fp16_ws2"), true}, {stale, false}}) {
      MainWindow w;
      w.resize(1200, 800);
      w.show();
      QVERIFY(openAndWait(w, path));
      w.showTab("params");
      auto* plots = w.paramsView()->plots();
      QSignalSpy ready(plots, &PlotsView::densityReady);
      w.paramsView()->selectParam("fc1.weight");
      QVERIFY(ready.wait(30000));
      QChart* chart = plots->panels()[2]->chart();
      QVERIFY(chart);
      const auto* x = qobject_cast<QValueAxis*>(chart->axes(Qt::Horizontal).first());
      QVERIFY(x);
      const double bin = (x->max() - x->min()) / 1.04 / 80;  // the axis pads the bins' range by 2 % each side
      int bins = 0, off = 0;
      for (auto* s : chart->series())
        if (auto* sc = qobject_cast<QScatterSeries*>(s))
          for (const QPointF& p : sc->points()) {
            ++bins;
            if (std::abs(p.x() - p.y()) > 1.5 * bin) ++off;
          }
      QVERIFY2(bins > 10, qPrintable(QString::number(bins)));
      if (healthy)
        QCOMPARE(off, 0);
      else
        QVERIFY2(off > bins / 3, qPrintable(QString("%1 of %2 bins off the diagonal").arg(off).arg(bins)));
    }
  }

  void cancelStopsRunningAnalysis() {
    MainWindow w;
    w.show();
    QSignalSpy started(w.session(), &Session::analysisStarted);
    QSignalSpy cancelled(w.session(), &Session::analysisCancelled);
    QSignalSpy finished(w.session(), &Session::analysisFinished);
    // Click Cancel as soon as the analysis starts (its result can only land in a later turn of the event
    // loop).
    bool clicked = false;
    auto click = connect(w.session(), &Session::analysisStarted, &w, [&] {
      QVERIFY(w.cancelButton()->isVisibleTo(&w));
      QTest::mouseClick(w.cancelButton(), Qt::LeftButton);
      clicked = true;
    });
    w.openPath(QString::fromStdString(test::healthy_fixture("zero3_fp16_ws2")), true);
    QVERIFY(cancelled.wait(60000));
    disconnect(click);
    QVERIFY(clicked);
    QCOMPARE(started.count(), 1);
    QCOMPARE(finished.count(), 0);
    QVERIFY(!w.session()->report());
    QVERIFY(!w.session()->analysing());
    QVERIFY(!w.progressBar()->isVisibleTo(&w));
    // F5 analyses again.
    QTest::keyClick(&w, Qt::Key_F5);
    QVERIFY(finished.wait(120000));
    QVERIFY(w.session()->report());
  }

  void supersededAnalysisIsDropped() {
    Session s;
    s.core().settings().analyse_on_open = false;
    QSignalSpy opened(&s, &Session::opened);
    s.open(QString::fromStdString(test::healthy_fixture("zero1_fp16_ws2")));
    QVERIFY(opened.wait(30000));
    QSignalSpy finished(&s, &Session::analysisFinished);
    QSignalSpy cancelled(&s, &Session::analysisCancelled);
    const int first = s.analyse();
    const int second = s.analyse();
    QVERIFY(second > first);
    QVERIFY(finished.wait(120000));
    QTest::qWait(200);
    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished.first().first().toInt(), second);
    QCOMPARE(cancelled.count(), 0);
    QVERIFY(s.report());
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestMainWindow)
#include "test_main_window.moc"
