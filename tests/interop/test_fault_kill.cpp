// A repair killed at any point (as by SIGKILL or a power cut) never damages its input and never leaves a
// half-written output: the output folder is either absent or complete, and then it verifies clean.
#include <QCryptographicHash>
#include <QtTest>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

std::map<std::string, QByteArray> hash_tree(const std::string& dir) {
  std::map<std::string, QByteArray> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    QFile f(QString::fromStdString(e.path().string()));
    if (!f.open(QIODevice::ReadOnly)) continue;
    QCryptographicHash h(QCryptographicHash::Sha256);
    h.addData(&f);
    out[fs::relative(e.path(), dir).string()] = h.result();
  }
  return out;
}

}  // namespace

class TestFaultKill : public QObject {
  Q_OBJECT

 private slots:
  void killedRepairLosesNothing() {
    test::TempDir dir;
    const std::string input = dir.file("in");
    auto synth = test::run_cli({"synth", input, "--stage", "2", "--dtype", "fp16", "--dp", "4", "--params",
                                "2000000", "--break", "stale_fp32"});
    CKPTDOC_EXPECT_EXIT(synth, 0);
    const auto before = hash_tree(input);
    int kill_points = 0, completed_outputs = 0, killed_but_complete = 0;
    for (int n = 1; n <= 400; ++n) {
      const std::string out = dir.file("out" + std::to_string(n));
      qputenv("CKPTDOC_FAULT", QByteArray("kill@") + QByteArray::number(n));
      const auto r = test::run_cli({"repair", input, "-o", out, "--refresh-fp32"});
      qunsetenv("CKPTDOC_FAULT");
      QVERIFY2(hash_tree(input) == before, qPrintable(QString("input changed after kill@%1").arg(n)));
      if (r.exit_code == 137) {
        ++kill_points;
        if (fs::exists(out)) {
          // Killed after the output folder was renamed into place (e.g. at the final directory fsync): it
          // must then be complete and verify clean.
          QVERIFY2(fs::exists(out + "/latest"),
                   qPrintable(QString("kill@%1 left an incomplete output").arg(n)));
          const auto d = test::run_cli({"diagnose", out});
          CKPTDOC_EXPECT_EXIT(d, 0);
          ++killed_but_complete;
        }
      } else {
        CKPTDOC_EXPECT_EXIT(r, 0);  // ran past its last I/O call: complete and verified
        QVERIFY(fs::exists(out + "/latest"));
        const auto d = test::run_cli({"diagnose", out});
        CKPTDOC_EXPECT_EXIT(d, 0);
        ++completed_outputs;
        break;
      }
    }
    qInfo(
        "kill points tried: %d (outputs absent: %d, complete after the final rename: %d), completed run: %d",
        kill_points, kill_points - killed_but_complete, killed_but_complete, completed_outputs);
    QVERIFY2(kill_points >= 50, qPrintable(QString("only %1 kill points").arg(kill_points)));
    QCOMPARE(completed_outputs, 1);
    // A later repair into a fresh folder still works after all those crashes.
    const auto again = test::run_cli({"repair", input, "-o", dir.file("final"), "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(again, 0);
  }

  // What a writer killed part way leaves beside its output (a partial folder, a temp file) is removed by the
  // very next run into that output, not only once it has aged: every writer holds a claim (flock) on what it
  // writes, and on a local file system a leftover nobody claims is provably dead. Each writer is killed at
  // its 1st, 2nd, 4th, ... file-system call until one run completes; after each kill the same command runs
  // again at once.
  void aKilledWritersLeftoversGoWithTheNextRun() {
    test::TempDir dir;
    const std::string input = dir.file("in");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", input, "--stage", "2", "--dp", "2", "--params", "200000"}),
                        0);
    fs::create_directory(dir.file("outs"));
    const std::vector<std::vector<std::string>> commands = {
        {"repair", input, "-o", dir.file("outs/repaired"), "--refresh-fp32"},
        {"convert", input, "--to", "universal", "-o", dir.file("outs/universal")},
        {"export", input, "-o", dir.file("outs/w.safetensors")},
        {"export", input, "-o", dir.file("outs/w.h5")},
        {"export", input, "-o", dir.file("outs/shards"), "--max-shard-size", "100KB"}};
    auto leftovers = [&] {
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(dir.file("outs")))
        if (e.path().filename().string().find(".ckptdoc-") != std::string::npos)
          names.push_back(e.path().filename());
      return names;
    };
    for (const auto& cmd : commands) {
      int left_by_kills = 0;
      for (int n = 1; n <= 4096; n *= 2) {
        fs::remove_all(dir.file("outs"));
        fs::create_directory(dir.file("outs"));
        qputenv("CKPTDOC_FAULT", QByteArray("kill@") + QByteArray::number(n));
        const auto killed = test::run_cli(cmd);
        qunsetenv("CKPTDOC_FAULT");
        if (killed.exit_code != 137) {
          CKPTDOC_EXPECT_EXIT(killed, 0);
          break;
        }
        if (!leftovers().empty()) ++left_by_kills;
        auto again = cmd;
        if (fs::exists(cmd[cmd[0] == "convert" ? 5 : 3]))
          again.push_back("--force");  // published before the kill
        CKPTDOC_EXPECT_EXIT(test::run_cli(again), 0);
        const auto left = leftovers();
        QVERIFY2(left.empty(),
                 qPrintable(QString::fromStdString(cmd[0] + " kill@" + std::to_string(n) + " left " +
                                                   (left.empty() ? std::string() : left.front()))));
      }
      QVERIFY2(left_by_kills > 0,
               qPrintable(QString::fromStdString(cmd[0] + ": no kill left anything to remove")));
    }
  }

  void injectedIoErrorsNameTheCause() {
    test::TempDir dir;
    const std::string input = dir.file("in");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", input, "--stage", "1", "--dp", "2", "--params", "200000"}),
                        0);
    const auto before = hash_tree(input);
    struct Case {
      const char* spec;
      const char* words;
    } cases[] = {{"fail@2:write:ENOSPC", "No space left on device"},
                 {"fail@1:fsync:EIO", "fsync"},
                 {"fail@1:rename:EIO", "rename"},
                 {"short@3:write:ENOSPC", "No space left on device"}};
    for (const auto& c : cases) {
      const std::string out = dir.file(std::string("out-") + c.spec);
      qputenv("CKPTDOC_FAULT", c.spec);
      const auto r = test::run_cli({"repair", input, "-o", out, "--reset-optimizer"});
      qunsetenv("CKPTDOC_FAULT");
      QVERIFY2(r.exit_code == 2 || r.exit_code == 1,
               qPrintable(QString::fromStdString(std::string(c.spec) + ": " + r.err)));
      QVERIFY2(r.err.find(c.words) != std::string::npos,
               qPrintable(QString::fromStdString(std::string(c.spec) + ": " + r.err)));
      QVERIFY2(!fs::exists(out), c.spec);
      QVERIFY(hash_tree(input) == before);
      for (const auto& e : fs::directory_iterator(dir.path()))
        QVERIFY2(e.path().filename().string().find("ckptdoc-partial") == std::string::npos, c.spec);
    }
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestFaultKill)
#include "test_fault_kill.moc"
