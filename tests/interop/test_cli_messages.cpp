// What the command line says when the user is wrong or asks: a typo gets the name it meant, `watch` on a
// checkpoint says what it is instead of waiting in silence, `ls` shows pickled enums as enums, sizes are in
// units, and every command's help gives its exit codes. Real DeepSpeed files (the committed fixtures) where a
// file is read.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <string>
#include <vector>

#include "test_support.h"

using namespace ckptdoc;

namespace {

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  size_t n = 0, at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    if (text.compare(at, prefix.size(), prefix) == 0) ++n;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return n;
}

}  // namespace

class TestCliMessages : public QObject {
  Q_OBJECT

 private slots:
  void typosGetTheNameTheyMeant_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("said");
    QTest::newRow("command") << QStringList{"diagnos", "x"}
                             << "unknown command 'diagnos': did you mean 'diagnose'?";
    QTest::newRow("swapped letters") << QStringList{"expotr", "x"} << "did you mean 'export'?";
    QTest::newRow("option") << QStringList{"diagnose", "x", "--jsn"}
                            << "unknown option '--jsn': did you mean '--json'?";
    QTest::newRow("option with value")
        << QStringList{"export", "x", "-o", "y", "--sorce=lp"} << "did you mean '--source'?";
  }
  void typosGetTheNameTheyMeant() {
    QFETCH(QStringList, args);
    QFETCH(QString, said);
    std::vector<std::string> a;
    for (const auto& s : args) a.push_back(s.toStdString());
    const auto r = test::run_cli(a);
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, said.toStdString()), r.err.c_str());
  }

  // Far from every name: no guess.
  void unrelatedWordsGetNoGuess() {
    const auto r = test::run_cli({"frobnicate", "x"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(!mentions(r.err, "did you mean"), r.err.c_str());
  }

  // `watch CKPT --once` waited forever without a word; a checkpoint is not a snapshot folder.
  void watchOnACheckpointSaysWhatItIs() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", ckpt);
    const auto r = test::run(test::cli(), {"watch", ckpt, "--once"}, 60000);
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, "holds a DeepSpeed checkpoint, not live-engine snapshots"), r.err.c_str());
    QVERIFY2(mentions(r.err, "ckptdoc diagnose " + ckpt), r.err.c_str());
  }

  // DeepSpeed pickles ZeroStageEnum as getattr(ZeroStageEnum, 'gradients'): shown as the member it is.
  void lsShowsPickledEnumsAsMembers() {
    const std::string file = test::deepspeed_fixture("zero2_fp16_ws2") +
                             "/checkpoint/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt";
    const auto r = test::run_cli({"ls", file});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(mentions(r.out, "zero_stage: enum deepspeed.runtime.zero.config.ZeroStageEnum.gradients"),
             r.out.c_str());
    QVERIFY2(!mentions(r.out, "getattr"), r.out.c_str());
  }

  void lsMaxItemsAppliesToSafetensors() {
    test::TempDir dir;
    const std::string out = dir.file("w.safetensors");
    CKPTDOC_EXPECT_EXIT(
        test::run_cli({"export", test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", "-o", out, "-q"}),
        0);
    const auto all = test::run_cli({"ls", out});
    CKPTDOC_EXPECT_EXIT(all, 0);
    const size_t tensors = count_lines_starting(all.out, "├─") + count_lines_starting(all.out, "└─");
    QVERIFY(tensors > 3);
    const auto few = test::run_cli({"ls", out, "--max-items", "3"});
    CKPTDOC_EXPECT_EXIT(few, 0);
    QCOMPARE(count_lines_starting(few.out, "├─"), size_t(3));
    QVERIFY2(mentions(few.out, "… " + std::to_string(tensors - 3) + " more"), few.out.c_str());
  }

  void planSizesAreInUnits() {
    test::TempDir dir;
    const auto r = test::run_cli({"repair", test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", "-o",
                                  dir.file("out"), "--reset-optimizer", "--dry-run"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(QString::fromStdString(r.out).contains(
                 QRegularExpression("About [0-9.]+ (KiB|MiB) \\([0-9]+ bytes\\) to write")),
             r.out.c_str());
  }

  void everyCommandsHelpGivesItsExitCodes_data() {
    QTest::addColumn<QString>("command");
    for (const char* c :
         {"ls", "inspect", "export", "diagnose", "diff", "gui", "demo", "repair", "watch", "convert"})
      QTest::newRow(c) << QString(c);
  }
  void everyCommandsHelpGivesItsExitCodes() {
    QFETCH(QString, command);
    const auto r = test::run_cli({command.toStdString(), "--help"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(mentions(r.out, "Exit status: 0 "), r.out.c_str());
    QVERIFY2(mentions(r.out, "2 "), r.out.c_str());
  }

  // The demo claims to be a DeepSpeed 0.12.6 checkpoint: its Adam step is global_steps + 1 as 0.12.6 writes
  // it (one optimizer step at initialisation), so converting it to universal warns of nothing; its stale
  // masters' finding names the files that hold them.
  void theDemoIsWhatDeepSpeedWrites() {
    test::TempDir dir;
    const std::string demo = dir.file("demo");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", demo}), 0);
    const auto c = test::run_cli({"convert", demo, "-o", dir.file("u"), "--to", "universal"});
    CKPTDOC_EXPECT_EXIT(c, 0);
    QVERIFY2(!mentions(c.out + c.err, "warning"), (c.out + c.err).c_str());
    const auto d = test::run_cli({"diagnose", demo, "--json"});
    CKPTDOC_EXPECT_EXIT(d, 1);
    const auto findings =
        QJsonDocument::fromJson(QByteArray::fromStdString(d.out)).object()["findings"].toArray();
    QVERIFY(!findings.isEmpty());
    const auto f = findings.first().toObject();
    QCOMPARE(f["code"].toString(), QString("fp32-master-mismatch"));
    QCOMPARE(f["files"].toArray(), (QJsonArray{"zero_pp_rank_0_mp_rank_00_optim_states.pt",
                                               "zero_pp_rank_1_mp_rank_00_optim_states.pt"}));
  }

  // `convert PATH` without -o said only "--output is required"; it also lists what convert writes.
  void convertWithoutOutputListsTheTargets() {
    const auto r = test::run_cli({"convert", test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    for (const char* t :
         {"-o OUT is required", "--to universal", "--to zero --world-size N", "--to checkpoint"})
      QVERIFY2(mentions(r.err, t), r.err.c_str());
  }

  void synthHelpListsEveryBreak() {
    const auto r = test::run_cli({"synth", "--help"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    for (const char* b : {"none", "stale_fp32", "stale_fp32_one_rank", "zero_moments_with_step",
                          "nan_in_exp_avg_sq", "truncate_rank", "missing_rank", "wrong_dp_world_size"})
      QVERIFY2(mentions(r.out, b), b);
  }

  // `gui` takes what ckptdoc-gui takes.
  void guiTakesTheAppsOptions() {
    const auto r = test::run_cli({"gui", "--help"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    for (const char* o : {"--shade", "--size", "--view", "--param", "--watch", "--screenshot", "--compare"})
      QVERIFY2(mentions(r.out, o), (std::string(o) + " missing: " + r.out).c_str());
    QVERIFY2(mentions(r.out, "diff"), r.out.c_str());
  }
};

CKPTDOC_TEST_MAIN(TestCliMessages)
#include "test_cli_messages.moc"
