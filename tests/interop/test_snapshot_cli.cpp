// The CLI on live-engine snapshots (built by tests/fixtures/make_snapshot.py from the committed real
// DeepSpeed checkpoints): `watch` reports a snapshot once its manifest is there and never before (a writer
// that writes slowly and waits on a gate), survives snapshots going away, stops with --fail-on; `diagnose
// --json` carries the live numbers; `convert` writes a checkpoint torch reads.
#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QtTest>
#include <filesystem>

#include "test_support.h"
#include "watch_process.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

std::string tag_dir(const std::string& fixture) {
  return test::deepspeed_fixture(fixture) + "/checkpoint/global_step5";
}

void make_snapshot(const std::string& fixture, const std::string& out, std::vector<std::string> args = {}) {
  args.insert(args.begin(), {tag_dir(fixture), out});
  const auto r = test::run_python(test::script("fixtures/make_snapshot.py"), args);
  if (r.exit_code != 0) throw std::runtime_error("make_snapshot.py failed: " + r.err);
}

// make_snapshot.py in the background (slow writes, gated manifest).
class Writer {
 public:
  explicit Writer(const std::vector<std::string>& args) {
    QStringList q{QString::fromStdString(test::script("fixtures/make_snapshot.py"))};
    for (const auto& a : args) q << QString::fromStdString(a);
    p_.start(QString::fromStdString(test::python()), q);
    p_.waitForStarted(30000);
  }
  bool finish() { return p_.waitForFinished(300000) && p_.exitCode() == 0; }
  ~Writer() {
    if (p_.state() != QProcess::NotRunning) {
      p_.kill();
      p_.waitForFinished();
    }
  }

 private:
  QProcess p_;
};

}  // namespace

class TestSnapshotCli : public QObject {
  Q_OBJECT

 private slots:
  // The writer writes both rank files slowly, then waits for a gate before the manifest. watch must report
  // the folder as pending (it looked at it) and must not report the snapshot until the manifest is there;
  // then it reports it complete and healthy.
  void watchNeverReadsAHalfWrittenSnapshot() {
    test::TempDir dir;
    fs::create_directories(dir.file("run"));
    test::WatchProcess watch({"watch", dir.file("run"), "--json", "--once", "--device", "cpu"});
    Writer writer(
        {tag_dir("zero2_fp16_ws2"), dir.file("run/step5"), "--slow", "2", "--gate", dir.file("gate")});
    const QJsonObject pending = watch.next(300000);
    QCOMPARE(pending["event"].toString(), QString("pending"));
    QCOMPARE(pending["tag"].toString(), QString("step5"));
    // the manifest does not exist yet, so nothing else can have been printed
    QVERIFY(!fs::exists(dir.file("run/step5/manifest.json")));
    test::write_text(dir.file("gate"), "go");
    const QJsonObject snap = watch.next_event("snapshot");
    QVERIFY2(!snap.isEmpty(), watch.seen().c_str());
    QCOMPARE(snap["tag"].toString(), QString("step5"));
    QCOMPARE(snap["global_steps"].toInt(), 5);
    // healthy: nothing half-read (no error or warning; the padding count is info)
    QVERIFY2(snap["worst"].isNull() || snap["worst"].toString() == "info", watch.seen().c_str());
    QCOMPARE(snap["exact_fraction"].toDouble(), 1.0);
    QCOMPARE(snap["loss_scale"].toDouble(), 256.0);
    QVERIFY(writer.finish());
    QCOMPARE(watch.finish(), 0);
    QVERIFY2(watch.seen().find("unreadable") == std::string::npos, watch.seen().c_str());
  }

  // Snapshots deleted after they were shown (rotation), and one deleted before it could be read, do not stop
  // it.
  void watchSurvivesDeletedSnapshots() {
    test::TempDir dir, src;
    fs::create_directories(dir.file("run"));
    make_snapshot("zero2_fp16_ws2", src.file("a"), {"--step", "10"});
    make_snapshot("zero2_fp16_ws2", src.file("b"), {"--step", "20"});
    test::WatchProcess watch({"watch", dir.file("run"), "--json", "--count", "2", "--device", "cpu"});
    fs::rename(src.file("a"), dir.file("run/a"));
    QCOMPARE(watch.next_event("snapshot")["tag"].toString(), QString("a"));
    fs::remove_all(dir.file("run/a"));
    QCOMPARE(watch.next_event("removed")["tag"].toString(), QString("a"));
    fs::rename(src.file("b"), dir.file("run/b"));
    QCOMPARE(watch.next_event("snapshot")["global_steps"].toInt(), 20);
    QCOMPARE(watch.finish(), 0);
  }

  // --fail-on error: exits 1 at the first snapshot with an error (NaN gradients in bf16), after printing it.
  void watchFailsOnAFinding() {
    test::TempDir dir;
    fs::create_directories(dir.file("run"));
    make_snapshot("zero2_bf16_ws2", dir.file("run/ok"), {"--step", "1"});
    make_snapshot("zero2_bf16_ws2", dir.file("run/bad"), {"--step", "2", "--grads", "nan"});
    const auto r =
        test::run_cli({"watch", dir.file("run"), "--json", "--fail-on", "error", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    QVERIFY(r.out.find("\"tag\":\"ok\"") != std::string::npos);
    QVERIFY(r.out.find("\"worst_code\":\"gradient-nonfinite\"") != std::string::npos);
    // the text form: one line per snapshot with tag, step, worst, exact fraction, grad norm, loss scale
    const auto t = test::run_cli({"watch", dir.file("run"), "--count", "2", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(t, 0);
    QVERIFY2(t.out.find("ok               step 1") != std::string::npos, t.out.c_str());
    QVERIFY2(t.out.find("ERROR gradient-nonfinite") != std::string::npos, t.out.c_str());
    // --timeout: nothing more comes
    CKPTDOC_EXPECT_EXIT(test::run_cli({"watch", dir.file("run"), "--count", "3", "--timeout", "2"}), 3);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"watch", dir.file("nope")}), 2);
  }

  void diagnoseJsonCarriesLiveNumbers() {
    test::TempDir dir;
    make_snapshot("zero2_fp16_ws2", dir.file("s"), {"--grads", "finite", "--live", R"({"grad_norm": 0.25})"});
    const auto r = test::run_cli({"diagnose", dir.file("s"), "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto live = QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object()["live"].toObject();
    QCOMPARE(live["global_steps"].toInt(), 5);
    QCOMPARE(live["grad_norm"].toDouble(), 0.25);
    QCOMPARE(live["loss_scale"].toDouble(), 256.0);
    QVERIFY(live["grads_present"].toBool());
    QVERIFY(live["recorded_grad_norm"].toDouble() > 0);
    const auto text = test::run_cli({"diagnose", dir.file("s"), "--device", "cpu"});
    QVERIFY2(text.out.find("live engine at step 5") != std::string::npos, text.out.c_str());
  }

  // Repairs read a snapshot like a checkpoint: re-partition to dp 3 and refresh the masters, both verified.
  void repairReadsASnapshot() {
    test::TempDir dir;
    make_snapshot("zero2_fp16_ws2", dir.file("s"));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", dir.file("s"), "--repartition", "--world-size", "3", "-o",
                                       dir.file("dp3"), "--device", "cpu"}),
                        0);
    QVERIFY(fs::exists(dir.file("dp3/s/zero_pp_rank_2_mp_rank_00_optim_states.pt")));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", dir.file("s"), "--refresh-fp32", "-o", dir.file("fresh"),
                                       "--device", "cpu"}),
                        0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", dir.file("fresh"), "--device", "cpu"}), 0);
  }

  // convert: the output is an ordinary checkpoint; torch reads every file (DeepSpeed loads it in the realds
  // test).
  void convertWritesACheckpointTorchReads() {
    test::TempDir dir;
    make_snapshot("zero3_fp16_ws2", dir.file("s"));
    const auto r = test::run_cli({"convert", dir.file("s"), "-o", dir.file("ckpt"), "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object()["verified"].toBool());
    QCOMPARE(test::read_text(dir.file("ckpt/latest")), std::string("global_step5"));
    const auto load = test::run(
        test::python(),
        {"-c",
         "import sys, glob; sys.path.insert(0, sys.argv[1]); import ds_stand_ins; ds_stand_ins.install(); "
         "import torch; fs = glob.glob(sys.argv[2] + '/global_step5/*.pt'); "
         "[torch.load(f, map_location='cpu') for f in fs]; print(len(fs))",
         test::fixtures_dir(), dir.file("ckpt")});
    CKPTDOC_EXPECT_EXIT(load, 0);
    QCOMPARE(load.out, std::string("4\n"));
    const auto inspect = test::run_cli({"diagnose", dir.file("ckpt"), "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(inspect, 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"convert", dir.file("s"), "-o", dir.file("ckpt")}), 2);  // not empty
    CKPTDOC_EXPECT_EXIT(test::run_cli({"convert", tag_dir("zero3_fp16_ws2"), "-o", dir.file("x")}),
                        2);  // no snapshot
  }
};

CKPTDOC_TEST_MAIN(TestSnapshotCli)
#include "test_snapshot_cli.moc"
