// `ckptdoc diagnose` while a file is cut under it (a save still running, NFS): the file is truncated at its
// 1st, 2nd, 4th, 8th ... touch by the CLI (mapped, or a range of it taken: the test hook CKPTDOC_CUT_FILE),
// so no race with the reader decides the outcome. Every cut must end with "changed while being read" naming
// the file: exit 2, or exit 1 when the catalog already lists the file as cut (before the SIGBUS guard it died
// of SIGBUS, exit 135; before the guard remembered dropped mappings, a universal param file, mapped only
// while read, was reported without its name, 2 runs in 5). The racing variant, a process stopped and cut from
// outside, is tests/bench/stress_changed_while_read.sh.
#include <QtTest>
#include <filesystem>

#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

class TestChangedWhileRead : public QObject {
  Q_OBJECT

 private slots:
  void diagnoseOfAFileCutAtEachTouch_data() {
    QTest::addColumn<bool>("universal");
    QTest::addColumn<QString>("victimName");  // relative to the tag folder
    QTest::newRow("rank file") << false << "zero_pp_rank_1_mp_rank_00_optim_states.pt";
    QTest::newRow("universal param file") << true << "zero/embed.weight/exp_avg.pt";
  }

  void diagnoseOfAFileCutAtEachTouch() {
    QFETCH(bool, universal);
    QFETCH(QString, victimName);
    const std::string victim_name = victimName.toStdString();
    test::TempDir dir;
    std::string ck = dir.file("ck");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", ck, "--stage", "2", "--dp", "2", "--params", "2000000"}), 0);
    std::string tag = "global_step10";
    if (universal) {
      CKPTDOC_EXPECT_EXIT(test::run_cli({"convert", ck, "-o", ck + "-u", "--to", "universal", "-q"}), 0);
      ck += "-u";
      tag += "_universal";
    }
    const std::string victim = ck + "/" + tag + "/" + victim_name;
    const std::string intact = dir.file("intact.pt");
    QVERIFY2(fs::exists(victim), victim.c_str());
    fs::copy_file(victim, intact);
    const auto size = fs::file_size(victim);

    int cuts = 0;
    for (int touch = 1; touch <= 1 << 16; touch *= 2) {
      fs::copy_file(intact, victim, fs::copy_options::overwrite_existing);
      const std::string spec = victim_name + ":65536:" + std::to_string(touch);
      qputenv("CKPTDOC_CUT_FILE", QByteArray::fromStdString(spec));
      const test::RunResult r = test::run_cli({"diagnose", ck, "--device", "cpu", "--threads", "1"});
      qunsetenv("CKPTDOC_CUT_FILE");
      const bool cut = r.err.find("test hook: cut") != std::string::npos;
      if (!cut) {
        // Fewer touches than `touch`: an untouched file reads as a complete report.
        QVERIFY2(r.exit_code == 0 || r.exit_code == 1, r.err.c_str());
        QVERIFY2(fs::file_size(victim) == size, "the hook cut without saying so");
        break;
      }
      ++cuts;
      const std::string what = spec + "\nexit " + std::to_string(r.exit_code) + "\n" + r.out + r.err;
      QVERIFY2(r.exit_code == 2 || r.exit_code == 1, what.c_str());
      const std::string& said = r.exit_code == 2 ? r.err : r.out;  // the error, or the catalog's finding
      QVERIFY2(said.find("changed while being read") != std::string::npos, what.c_str());
      QVERIFY2(said.find(victim) != std::string::npos, what.c_str());  // the file, by its path
      QVERIFY2(r.out.find("No problems found") == std::string::npos, what.c_str());
    }
    QVERIFY2(cuts >= 3, "the file was touched fewer than 3 times: the test checks too little");
  }
};

CKPTDOC_TEST_MAIN(TestChangedWhileRead)
#include "test_changed_while_read.moc"
