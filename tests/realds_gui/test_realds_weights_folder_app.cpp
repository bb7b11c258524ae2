// Both views' repair of weights folders that keep their optimizer beside the weights, as real frameworks
// wrote them: a Hugging Face Trainer checkpoint-N/ without DeepSpeed (hf_trainer_plain, optimizer.pt) and an
// Accelerate FSDP2 FULL_STATE_DICT save_state (accelerate_fsdp2_full_ws2, optimizer.bin). The catalog reads
// them, but their repairs are their source's (sources/weights_folder/), as the CLI runs them: Repair opens
// the source's own repair (not DeepSpeed's plan), offers only the actions the source allows on the folder
// (saying why the others are off), and writes what `ckptdoc repair` writes, byte for byte. The frameworks
// judge the CLI's output in test_realds_weights_folder_repair.
#include <QAction>
#include <QCheckBox>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <memory>

#include "app_settings.h"
#include "gui_test_main.h"
#include "imgui_driver.h"
#include "main_window.h"
#include "realds_support.h"
#include "same_tree.h"
#include "session.h"
#include "source_repair_dialog.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;
namespace realds = ckptdoc::test::realds;

namespace {

std::string openAndWait(MainWindow& w, const std::string& path) {
  QSignalSpy done(w.session(), &Session::analysisFinished);
  QSignalSpy failed(w.session(), &Session::openFailed);
  QSignalSpy analysisFailed(w.session(), &Session::analysisFailed);
  w.openPath(QString::fromStdString(path), true);
  for (int i = 0; i < 3000 && done.isEmpty() && failed.isEmpty() && analysisFailed.isEmpty(); ++i)
    QTest::qWait(100);
  if (!failed.isEmpty()) return "open failed: " + failed.front().at(1).toString().toStdString();
  if (!analysisFailed.isEmpty())
    return "analysis failed: " + analysisFailed.front().at(1).toString().toStdString();
  return done.isEmpty() ? "no analysis within 300 s" : "";
}

// Checkpoint > Repair… in a window showing `path`: the dialog it opened, if the source's own.
SourceRepairDialog* repairFromTheMenu(MainWindow& w) {
  auto* action = w.findChild<QAction*>(QStringLiteral("repairAction"));
  if (!action || !action->isEnabled()) return nullptr;
  action->trigger();
  return w.findChild<SourceRepairDialog*>();
}

}  // namespace

class TestRealdsWeightsFolderApp : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    AppSettings().setDevice(DeviceKind::Cpu);
  }

  // The Trainer folder in the Qt app: Repair offers the reset and the drop, not the refresh (no fp32
  // masters, said under it); Repair with "Reset optimizer state" writes what `ckptdoc repair
  // --reset-optimizer` writes, byte for byte, and says what the CLI says.
  void qtResetsTrainerFolderAsTheCli() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("hf_trainer_plain");
    MainWindow w;
    const std::string why = openAndWait(w, e.save_dir);
    QVERIFY2(why.empty(), why.c_str());
    auto* d = repairFromTheMenu(w);
    QVERIFY2(d, "Checkpoint > Repair did not open the folder's own repair");
    QVERIFY(d->resetOptimizer()->isEnabled());
    QVERIFY(d->dropOptimizer()->isEnabled());
    QVERIFY(!d->findChild<QLabel*>(QStringLiteral("dropOptimizerRefused")));
    QVERIFY(!d->refreshFp32()->isEnabled());
    auto* refused = d->findChild<QLabel*>(QStringLiteral("refreshFp32Refused"));
    QVERIFY(refused);
    QVERIFY2(refused->text().contains(QStringLiteral("no masters to refresh")), qPrintable(refused->text()));
    test::TempDir dir;
    const std::string ours = dir.file("app-reset"), cli = dir.file("cli-reset");
    d->resetOptimizer()->setChecked(true);
    d->setOutput(QString::fromStdString(ours));
    QSignalSpy finished(d, &SourceRepairDialog::repairFinished);
    d->runButton()->click();
    QVERIFY(finished.wait(300000));
    QVERIFY2(finished.front().at(0).toBool(), qPrintable(d->resultText()));
    const auto r = test::run_cli({"repair", e.save_dir, "-o", cli, "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(test::files_in(cli).size() > 5);
    test::expect_same_tree(ours, cli);
    QCOMPARE(d->resultText(), QString::fromStdString(r.out)
                                  .replace(QString::fromStdString(cli), QString::fromStdString(ours))
                                  .trimmed());
  }

  // A finding's Fix opens the folder's repair with the finding's table repair (MainWindow::openRepair hands
  // it to sourceRepairDialog). On the Trainer folder a refresh's Fix (fp32-master-mismatch,
  // lp-source-mismatch) cannot be taken: the dialog says so first, and why, rather than opening with
  // nothing ticked; a reset's Fix opens with the reset ticked and nothing said. main said nothing.
  void qtFixThatDoesNotApplySaysWhy() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("hf_trainer_plain");
    MainWindow w;
    const std::string why = openAndWait(w, e.save_dir);
    QVERIFY2(why.empty(), why.c_str());
    auto* refresh = w.sourceRepairDialog(analysis::RepairKind::RefreshFp32);
    QVERIFY(refresh);
    auto* said = refresh->findChild<QLabel*>(QStringLiteral("findingRepairRefused"));
    QVERIFY2(said, "the dialog opened with nothing ticked and did not say why");
    QVERIFY2(said->text().contains(QStringLiteral("Refresh fp32 masters")) &&
                 said->text().contains(QStringLiteral("does not apply")) &&
                 said->text().contains(QStringLiteral("no masters to refresh")),
             qPrintable(said->text()));
    QVERIFY(!refresh->refreshFp32()->isChecked() && !refresh->resetOptimizer()->isChecked() &&
            !refresh->dropOptimizer()->isChecked());
    delete refresh;
    auto* reset = w.sourceRepairDialog(analysis::RepairKind::ResetOptimizer);
    QVERIFY(reset);
    QVERIFY(reset->resetOptimizer()->isChecked());
    QVERIFY(!reset->findChild<QLabel*>(QStringLiteral("findingRepairRefused")));
  }

  // The Accelerate folder in the Qt app: Repair offers the reset but not the drop, saying why (load_state
  // reads optimizer.bin for every prepared optimizer).
  void qtRefusesAccelerateDropSayingWhy() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("accelerate_fsdp2_full_ws2");
    MainWindow w;
    const std::string why = openAndWait(w, e.save_dir);
    QVERIFY2(why.empty(), why.c_str());
    auto* d = repairFromTheMenu(w);
    QVERIFY2(d, "Checkpoint > Repair did not open the folder's own repair");
    QVERIFY(d->resetOptimizer()->isEnabled());
    QVERIFY(!d->dropOptimizer()->isEnabled());
    auto* refused = d->findChild<QLabel*>(QStringLiteral("dropOptimizerRefused"));
    QVERIFY(refused);
    QVERIFY2(refused->text().contains(QStringLiteral("Accelerator.load_state")), qPrintable(refused->text()));
    QVERIFY2(refused->text().contains(QStringLiteral("Reset optimizer state")), qPrintable(refused->text()));
  }

  // The same in the ImGui app, through its own clicks: Checkpoint > Repair on the Trainer folder offers the
  // reset and the drop (not the refresh); a reset held at its second write shows its bar part way and Cancel
  // publishes nothing; then a reset writes what the CLI writes, byte for byte. On the Accelerate folder the
  // drop is off, saying why. A refresh's Fix on the Trainer folder says it does not apply, and why.
  void imguiRepairsTrainerFolderAsTheCli() {
    REALDS_REQUIRE_DS("0.19");
    Xvfb x;
    const std::string no = x.start();
    if (!no.empty()) QSKIP(no.c_str());
    const auto e = realds::checkpoint("hf_trainer_plain");
    test::TempDir dir;
    const std::string ours = dir.file("app-reset"), cli = dir.file("cli-reset");
    const auto r = runScript(x, dir, e.save_dir,
                             "wait analysed 300\n"
                             "click menu.checkpoint\n"
                             "click menu.repair\n"
                             "frames 2\n"
                             "expect repair-offered reset-optimizer\n"
                             "expect repair-offered drop-optimizer\n"
                             "expect repair-refused refresh-fp32 no masters to refresh\n"
                             "click repair.reset-optimizer\n"
                             "set repair.output " +
                                 dir.file("cancelled") +
                                 "\n"
                                 "hold-write 2\n"
                                 "click repair.run\n"
                                 "wait held 120\n"
                                 "frames 3\n"
                                 "expect repair-progress\n"
                                 "click repair.cancel\n"
                                 "release-write\n"
                                 "wait repaired 120\n"
                                 "expect repair-message cancelled\n"
                                 "set repair.output " +
                                 ours +
                                 "\n"
                                 "click repair.run\n"
                                 "wait repaired 300\n"
                                 "expect repair-message Reset the Adam state of 21 params\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(QString::fromStdString(r.err).contains("expect repair-progress: ok"), r.err.c_str());
    for (const auto& f : test::files_in(dir.path()))  // the cancelled one left no output, no partial folder
      QVERIFY2(f == "run.script" || f == "config" || f == "app-reset", f.c_str());
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", e.save_dir, "-o", cli, "--reset-optimizer"}), 0);
    QVERIFY(test::files_in(cli).size() > 5);
    test::expect_same_tree(ours, cli);

    const auto a = realds::checkpoint("accelerate_fsdp2_full_ws2");
    test::TempDir adir;
    const auto ra = runScript(x, adir, a.save_dir,
                              "wait analysed 300\n"
                              "click menu.checkpoint\n"
                              "click menu.repair\n"
                              "frames 2\n"
                              "expect repair-offered reset-optimizer\n"
                              "expect repair-refused drop-optimizer Accelerator.load_state\n"
                              "quit\n");
    CKPTDOC_EXPECT_EXIT(ra, 0);
    // A refresh's Fix on the Trainer folder (what a finding's Fix button runs): the window says first that
    // it does not apply, and why.
    test::TempDir fdir;
    const auto rf = runScript(x, fdir, e.save_dir,
                              "wait analysed 300\n"
                              "fix refresh-fp32\n"
                              "frames 2\n"
                              "expect repair-fix-refused does not apply\n"
                              "expect repair-fix-refused no masters to refresh\n"
                              "quit\n");
    CKPTDOC_EXPECT_EXIT(rf, 0);
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestRealdsWeightsFolderApp)
#include "test_realds_weights_folder_app.moc"
