// The desktop app on a PyTorch Distributed Checkpoint that torch itself wrote (tests/fixtures/dcp/fsdp2_ws2:
// FSDP2 at world 2, 3 Adam steps, dcp.save; see tests/fixtures/dcp/README.md): the Storage tab's map has one
// row per storage file with every item the CLI's `inspect --json` places there (key, byte offset, length,
// read back from the drawn boxes), its keys table the CLI's keys, and the Overview the findings and verdict
// of `diagnose --json`. A copy missing one .distcp file shows the CLI's dcp-file-missing finding, and its row
// is drawn as not on disk and named by the finding.
#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <filesystem>

#include "app_settings.h"
#include "ckptdoc/io/held_write_io.h"
#include "export_dialog.h"
#include "findings_model.h"
#include "gui_test_main.h"
#include "main_window.h"
#include "same_tree.h"
#include "session.h"
#include "source_repair_dialog.h"
#include "storage_expectations.h"
#include "storage_map_widget.h"
#include "storage_view.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

std::string fixture() {
  return test::fixtures_dir() + "/dcp/fsdp2_ws2";
}

// Opens `path` and waits for its analysis; false (with why) when it fails or does not end.
std::string openAndWait(MainWindow& w, const std::string& path) {
  QSignalSpy done(w.session(), &Session::analysisFinished);
  QSignalSpy failed(w.session(), &Session::openFailed);
  QSignalSpy analysisFailed(w.session(), &Session::analysisFailed);
  w.openPath(QString::fromStdString(path), true);
  for (int i = 0; i < 600 && done.isEmpty() && failed.isEmpty() && analysisFailed.isEmpty(); ++i)
    QTest::qWait(100);
  if (!failed.isEmpty()) return "open failed: " + failed.front().at(1).toString().toStdString();
  if (!analysisFailed.isEmpty())
    return "analysis failed: " + analysisFailed.front().at(1).toString().toStdString();
  return done.isEmpty() ? "no analysis within 60 s" : "";
}

}  // namespace

class TestStorageView : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();  // the recent-files list goes to a private file
  }

  void dcpFolderShowsWhatTheCliReports() {
    MainWindow w;
    const std::string why = openAndWait(w, fixture());
    QVERIFY2(why.empty(), why.c_str());
    int exit = -1;
    const auto cli = test::cli_storage(fixture(), &exit);
    QCOMPARE(exit, 0);
    QCOMPARE(cli.files.size(), size_t{2});  // __0_0.distcp, __1_0.distcp: the two ranks
    const auto shown = test::qt_storage(w);
    QVERIFY(!shown.verdict.empty());
    const std::string diff = test::storage_difference(cli, shown);
    QVERIFY2(diff.empty(), diff.c_str());
    // Every row is on disk and drawn to one scale: the longest file spans the whole width.
    const auto& pic = w.storageView()->map()->picture();
    double widest = 0;
    for (const auto& row : pic.rows) {
      QVERIFY(row.present);
      QVERIFY(row.findings.empty());
      widest = std::max(widest, row.extent);
    }
    QCOMPARE(widest, 1.0);
  }

  void missingDistcpFileIsNamedInTheView() {
    test::TempDir dir;
    const std::string copy = dir.file("fsdp2_ws2");
    test::copy_tree(fixture(), copy);
    std::filesystem::remove(copy + "/__1_0.distcp");
    MainWindow w;
    const std::string why = openAndWait(w, copy);
    QVERIFY2(why.empty(), why.c_str());
    int exit = -1;
    const auto cli = test::cli_storage(copy, &exit);
    QCOMPARE(exit, 1);
    bool missing = false;
    for (const auto& [code, severity, message] : cli.findings)
      missing = missing || (code == "dcp-file-missing" && severity == "error");
    QVERIFY(missing);
    const auto shown = test::qt_storage(w);
    const std::string diff = test::storage_difference(cli, shown);
    QVERIFY2(diff.empty(), diff.c_str());
    // The file's row stays, drawn as not on disk, named by the finding.
    bool rowMarked = false;
    for (const auto& row : w.storageView()->map()->picture().rows)
      if (row.label == "__1_0.distcp")
        rowMarked = !row.present && std::find(row.findings.begin(), row.findings.end(), "dcp-file-missing") !=
                                        row.findings.end();
    QVERIFY(rowMarked);
    // The overview card of the finding is there.
    QVERIFY(w.findChild<QWidget*>(QStringLiteral("finding_dcp-file-missing")) != nullptr);
  }

  // A sharded export (5 shards) held at its second shard's write: the dialog's bar shows the bytes written so
  // far, its Cancel stops the export, and nothing is left: no output folder, no partial folder.
  void exportShowsProgressAndCancels() {
    MainWindow w;
    const std::string why = openAndWait(w, fixture());
    QVERIFY2(why.empty(), why.c_str());
    test::TempDir dir;
    ExportDialog d(w.session());
    d.findChild<QLineEdit*>(QStringLiteral("shardSize"))->setText(QStringLiteral("1"));  // a shard a tensor
    d.setOutputPath(QString::fromStdString(dir.file("hf")));
    auto* bar = d.findChild<QProgressBar*>();
    QVERIFY(bar);
    HeldWriteIo io(/*hold_at=*/2);
    ScopedFileIo scoped(io);
    d.runButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(io.held(), 60000);
    // The bar moves on the session's progress tick: part way, not full.
    QTRY_VERIFY_WITH_TIMEOUT(bar->value() > 0, 10000);
    QVERIFY(bar->value() < bar->maximum());
    QVERIFY2(!bar->isHidden(), "the bar is hidden while the export runs");
    QPushButton* cancel = nullptr;
    for (auto* b : d.findChildren<QPushButton*>())
      if (b->text() == QStringLiteral("Cancel")) cancel = b;
    QVERIFY(cancel);
    cancel->click();
    io.release();
    QTRY_VERIFY_WITH_TIMEOUT(d.status()->text().contains(QStringLiteral("cancelled")), 60000);
    QVERIFY(test::files_in(dir.path()).empty());
  }

  // Export from the app writes what `ckptdoc export` writes (whose output torch's dcp_to_torch_save judges in
  // test_dcp_export), byte for byte: one safetensors file, one torch file, and shards in a folder.
  void exportWritesWhatTheCliExports_data() {
    QTest::addColumn<QString>("format");
    QTest::addColumn<QString>("shards");
    QTest::addColumn<QString>("name");
    QTest::newRow("safetensors") << "safetensors"
                                 << ""
                                 << "model.safetensors";
    QTest::newRow("torch") << "torch"
                           << ""
                           << "model.bin";
    QTest::newRow("shards") << "safetensors"
                            << "2KB"
                            << "hf";
  }
  void exportWritesWhatTheCliExports() {
    QFETCH(QString, format);
    QFETCH(QString, shards);
    QFETCH(QString, name);
    MainWindow w;
    const std::string why = openAndWait(w, fixture());
    QVERIFY2(why.empty(), why.c_str());
    QAction* action = nullptr;
    for (QAction* a : w.findChildren<QAction*>())
      if (a->text() == QStringLiteral("&Export weights…")) action = a;
    QVERIFY(action && action->isEnabled());
    test::TempDir dir;
    const std::string ours = dir.file("app-" + name.toStdString()),
                      cli = dir.file("cli-" + name.toStdString());
    ExportDialog d(w.session());
    auto* formats = d.findChild<QComboBox*>();
    QVERIFY(formats);
    formats->setCurrentIndex(formats->findData(format));
    QVERIFY(formats->currentIndex() >= 0);
    d.findChild<QLineEdit*>(QStringLiteral("shardSize"))->setText(shards);
    d.setOutputPath(QString::fromStdString(ours));
    QSignalSpy exported(&d, &ExportDialog::exported);
    d.runButton()->click();
    QVERIFY2(exported.wait(120000), qPrintable(d.status()->text()));
    QVERIFY2(d.status()->text().contains("Exported"), qPrintable(d.status()->text()));
    std::vector<std::string> args{"export", fixture(), "-o", cli};
    if (format == "torch") args.insert(args.end(), {"--format", "torch"});
    if (!shards.isEmpty()) args.insert(args.end(), {"--max-shard-size", shards.toStdString()});
    CKPTDOC_EXPECT_EXIT(test::run_cli(args), 0);
    if (!shards.isEmpty()) QVERIFY(test::files_in(cli).size() > 2);  // shards and their index
    test::expect_same_tree(ours, cli);
  }

  // An FSDP2 save whose Adam moments were lost while the steps were kept (written by torch: see
  // tests/fixtures/dcp/README.md), fixed from the Overview: the finding's Fix opens the source's repair with
  // "Reset optimizer state" ticked, and Repair writes what `ckptdoc repair --reset-optimizer` writes (which
  // torch's dcp.load and an Adam step judge in test_realds_dcp_reset), byte for byte.
  void momentsLostAreResetFromTheOverview() {
    const std::string in = test::fixtures_dir() + "/dcp/fsdp2_ws2_moments_lost";
    MainWindow w;
    const std::string why = openAndWait(w, in);
    QVERIFY2(why.empty(), why.c_str());
    auto* fix = w.findChild<QPushButton*>(QStringLiteral("fixButton_dcp-moments-lost"));
    QVERIFY(fix);
    fix->click();
    auto* d = w.findChild<SourceRepairDialog*>();
    QVERIFY(d);
    QVERIFY(d->resetOptimizer()->isChecked());
    QVERIFY(!d->refreshFp32()->isChecked());
    test::TempDir dir;
    const std::string ours = dir.file("app-fixed"), cli = dir.file("cli-fixed");
    d->setOutput(QString::fromStdString(ours));
    QSignalSpy finished(d, &SourceRepairDialog::repairFinished);
    d->runButton()->click();
    QVERIFY(finished.wait(120000));
    QVERIFY2(finished.front().at(0).toBool(), qPrintable(d->resultText()));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", cli, "--reset-optimizer"}), 0);
    QVERIFY(test::files_in(cli).size() > 2);
    if (!test::expect_same_tree(ours, cli)) return;
    // What the source cannot do is refused in the words of the dialog's own controls, writing nothing.
    d = w.sourceRepairDialog(analysis::RepairKind::ResetOptimizer);
    QVERIFY(d);
    d->dropOptimizer()->setChecked(true);
    d->setOutput(QString::fromStdString(dir.file("refused")));
    QSignalSpy refused(d, &SourceRepairDialog::repairFinished);
    d->runButton()->click();
    QVERIFY(refused.wait(120000));
    QVERIFY(!refused.front().at(0).toBool());
    QVERIFY2(d->resultText().contains(QStringLiteral("\u201cReset optimizer state\u201d")),
             qPrintable(d->resultText()));
    QVERIFY(!std::filesystem::exists(dir.file("refused")));
  }

  // "Refresh fp32 masters" is off before Repair is pressed, on the Fix that names it too: a DCP folder's
  // torch optimizer steps the saved params themselves, so it holds no fp32 masters (the source's
  // repair_refusal). The reason is under the box and is its tooltip; the other actions stay on. main left the
  // box on and ticked, and refused only once Repair was pressed.
  void refreshFp32IsOffWithItsReason() {
    MainWindow w;
    const std::string why = openAndWait(w, fixture());
    QVERIFY2(why.empty(), why.c_str());
    auto* d = w.sourceRepairDialog(analysis::RepairKind::RefreshFp32);
    QVERIFY(d);
    QVERIFY(!d->refreshFp32()->isEnabled());
    QVERIFY(!d->refreshFp32()->isChecked());
    auto* reason = d->findChild<QLabel*>(QStringLiteral("refreshFp32Refused"));
    QVERIFY(reason);
    QVERIFY2(reason->text().contains(QStringLiteral("holds no fp32 master copy of its weights")) &&
                 reason->text().contains(QStringLiteral("\u201cRefresh fp32 masters\u201d")),
             qPrintable(reason->text()));
    QCOMPARE(d->refreshFp32()->toolTip(), reason->text());
    QVERIFY(d->resetOptimizer()->isEnabled() && d->dropOptimizer()->isEnabled());
    QVERIFY(!d->findChild<QLabel*>(QStringLiteral("resetOptimizerRefused")));
  }

  // A reset held part way through copying the folder: the footer shows the copy's progress, Cancel stops it,
  // and neither the output nor a partial folder is left; the input is as it was.
  void sourceRepairShowsProgressAndCancels() {
    const std::string in = test::fixtures_dir() + "/dcp/fsdp2_ws2_moments_lost";
    MainWindow w;
    const std::string why = openAndWait(w, in);
    QVERIFY2(why.empty(), why.c_str());
    auto* d = w.sourceRepairDialog(analysis::RepairKind::ResetOptimizer);
    QVERIFY(d);
    test::TempDir dir;
    d->setOutput(QString::fromStdString(dir.file("fixed")));
    auto* bar = d->findChild<QProgressBar*>();
    QVERIFY(bar);
    HeldWriteIo io(/*hold_at=*/2);
    ScopedFileIo scoped(io);
    QSignalSpy finished(d, &SourceRepairDialog::repairFinished);
    d->runButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(io.held(), 60000);
    QTRY_VERIFY_WITH_TIMEOUT(bar->value() > 0, 10000);
    QVERIFY(bar->value() < bar->maximum());
    QPushButton* cancel = nullptr;
    for (auto* b : d->findChildren<QPushButton*>())
      if (b->text() == QStringLiteral("Cancel")) cancel = b;
    QVERIFY(cancel);
    cancel->click();
    io.release();
    QVERIFY(finished.wait(60000) || !finished.isEmpty());
    QVERIFY(!finished.front().at(0).toBool());
    QCOMPARE(d->resultText(), QStringLiteral("Repair cancelled; nothing was written."));
    QVERIFY(test::files_in(dir.path()).empty());
  }

  // Checkpoint > Repair… with "Drop optimizer state" writes what `ckptdoc repair --drop-optimizer` writes
  // (whose output torch's dcp.load judges in test_realds_dcp_reset), byte for byte.
  void optimizerIsDroppedAsTheCliDrops() {
    MainWindow w;
    const std::string why = openAndWait(w, fixture());
    QVERIFY2(why.empty(), why.c_str());
    auto* d = w.sourceRepairDialog(analysis::RepairKind::DropOptimizer);
    QVERIFY(d);
    QVERIFY(d->dropOptimizer()->isChecked());
    test::TempDir dir;
    const std::string ours = dir.file("app-dropped"), cli = dir.file("cli-dropped");
    d->setOutput(QString::fromStdString(ours));
    QSignalSpy finished(d, &SourceRepairDialog::repairFinished);
    d->runButton()->click();
    QVERIFY(finished.wait(120000));
    QVERIFY2(finished.front().at(0).toBool(), qPrintable(d->resultText()));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", fixture(), "-o", cli, "--drop-optimizer"}), 0);
    QVERIFY(test::files_in(cli).size() > 1);
    test::expect_same_tree(ours, cli);
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestStorageView)
#include "test_storage_view.moc"
