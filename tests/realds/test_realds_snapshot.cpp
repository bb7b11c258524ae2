// resources/python/ckptdoc_hook.py on real DeepSpeed (v0.12.6, CPU, 2 ranks, tests/realds/hook_driver.py):
// for ZeRO-1/2/3 fp16/bf16 and BF16_Optimizer, a snapshot holds exactly what engine.save_checkpoint writes at
// the same step (byte for byte) and gives the same diagnosis and statistics; dumping changes no training
// state; the recorded gradients' norm is the one DeepSpeed's step computes from them; export equals
// zero_to_fp32.py of the checkpoint; convert's output loads in DeepSpeed with optimizer states and trains a
// step; guard raises on the #762 state and passes a healthy load; every() + watch follow a run.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "realds_support.h"
#include "watch_process.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

std::string hook_driver() {
  return test::script("realds/hook_driver.py");
}

QJsonObject json_file(const std::string& path) {
  QByteArray bytes = QByteArray::fromStdString(test::read_text(path));
  bytes.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null");
  return QJsonDocument::fromJson(bytes).object();
}

QJsonObject diagnose_json(const std::string& path) {
  const auto r = test::run_cli({"diagnose", path, "--json", "--device", "cpu"});
  if (r.exit_code != 0 && r.exit_code != 1)
    throw std::runtime_error("diagnose " + path + " exited " + std::to_string(r.exit_code) + ": " + r.err);
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return "{" + s + "}";
}

std::vector<std::string> model_args(const QString& cfg) {
  // "stage,dtype[,bf16opt][,edge]"
  const auto parts = cfg.split(',');
  std::vector<std::string> a{"--stage", parts[0].toStdString(), "--dtype", parts[1].toStdString()};
  if (parts.contains("bf16opt")) a.push_back("--bf16-optimizer");
  if (parts.contains("edge")) {
    a.push_back("--model");  // (not insert of a list: GCC 12 warns falsely on it, -Warray-bounds)
    a.push_back("edge");
  }
  return a;
}

void expect_unchanged(const QJsonObject& facts) {
  for (const auto& r : facts["ranks"].toArray()) {
    const auto dumps = r.toObject()["dumps"].toObject();
    for (auto it = dumps.begin(); it != dumps.end(); ++it) {
      const auto changed = it.value().toObject()["changed"].toArray();
      QVERIFY2(changed.isEmpty(), ("dump '" + it.key().toStdString() + "' on rank " +
                                   std::to_string(r.toObject()["rank"].toInt()) + " changed " +
                                   QJsonDocument(changed).toJson(QJsonDocument::Compact).toStdString())
                                      .c_str());
    }
  }
}

// One configuration end to end: train on 2 ranks with snapshots and a save_checkpoint at the same step, then
// every check of this file's header on the result. `like`: the matrix entry configured like it (the real
// load).
void check_snapshot_is_the_checkpoint(const std::string& cfg, const std::string& like,
                                      const std::string& ds) {
  test::TempDir dir;
  auto args = std::vector<std::string>{hook_driver(), "train", "--out",  dir.path(),
                                       "--steps",     "3",     "--json", dir.file("facts.json")};
  for (const auto& a : model_args(QString::fromStdString(cfg))) args.push_back(a);
  const auto run = realds::launch(args, 2, ds, dir.file("logs"));
  CKPTDOC_EXPECT_EXIT(run, 0);
  const QJsonObject facts = json_file(dir.file("facts.json"));
  const std::string tag = facts["tag"].toString().toStdString();
  const std::string snap = dir.file("snapshots/" + tag), ckpt = dir.file("checkpoint");

  // 1. No dump changed training state (weights, masters, moments, grads, counters, scheduler, RNG).
  expect_unchanged(facts);
  if (QTest::currentTestFailed()) return;

  // 2. The snapshot holds the files save_checkpoint wrote at that step, byte for byte.
  const auto same = test::run_python(test::script("realds/compare_snapshot.py"), {snap, ckpt + "/" + tag});
  CKPTDOC_EXPECT_EXIT(same, 0);

  // 3. The same diagnosis: findings and every per-param statistic.
  const auto a = diagnose_json(ckpt), b = diagnose_json(snap);
  for (const char* sev : {"error", "warning", "info"})
    QVERIFY2(
        realds::codes(a, sev) == realds::codes(b, sev),
        (std::string(sev) + ": " + joined(realds::codes(a, sev)) + " vs " + joined(realds::codes(b, sev)))
            .c_str());
  QVERIFY(!a["params"].toArray().isEmpty());
  QVERIFY2(a["params"] == b["params"], "per-param statistics differ between the snapshot and the checkpoint");
  QCOMPARE(b["live"].toObject()["global_steps"].toInt(), facts["steps"].toInt());

  // 4. Gradients recorded between backward() and step(): for ZeRO their norm is the global one DeepSpeed's
  // step
  //    computed from them; for BF16_Optimizer (whose ranks step with unreduced gradients in v0.12.6, see
  //    hook_driver.py) the norm of what each rank's step consumes, read from DeepSpeed's attributes.
  const auto g = diagnose_json(dir.file("snapshots/with_grads"))["live"].toObject();
  QVERIFY(g["grads_present"].toBool());
  QCOMPARE(g["grad_nonfinite"].toInt(), 0);
  const double ours = g["recorded_grad_norm"].toDouble();
  const auto rank0 = facts["ranks"].toArray()[0].toObject();
  const bool bf16opt = cfg.find("bf16opt") != std::string::npos;
  const double theirs =
      (bf16opt ? rank0["grad_norm_of_partitions"] : rank0["grad_norm_deepspeed"]).toDouble();
  QVERIFY2(theirs > 0 && std::abs(ours - theirs) <= 1e-5 * theirs,
           ("recorded gradients' norm " + std::to_string(ours) + ", DeepSpeed's " + std::to_string(theirs))
               .c_str());
  // after the step there are none, and the snapshot says so
  const auto after = diagnose_json(dir.file("snapshots/after_step"));
  QVERIFY(after["live"].toObject()["grads_requested"].toBool());
  QVERIFY(!after["live"].toObject()["grads_present"].toBool());
  const auto infos = realds::codes(after, "info");
  QVERIFY2(std::find(infos.begin(), infos.end(), "gradients-not-recorded") != infos.end(),
           joined(infos).c_str());

  // 5. export of the snapshot equals DeepSpeed's zero_to_fp32.py of the checkpoint (v0.12.6's script rejects
  //    BF16_Optimizer checkpoints).
  if (!bf16opt) {
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", snap, "-o", dir.file("snap.pt"), "--format", "torch"}), 0);
    CKPTDOC_EXPECT_EXIT(realds::zero_to_fp32(ckpt, dir.file("ref.bin"), ds), 0);
    CKPTDOC_EXPECT_EXIT(test::run_python(test::script("fixtures/compare_state_dicts.py"),
                                         {dir.file("snap.pt"), dir.file("ref.bin")}),
                        0);
  }

  // 6. convert: a checkpoint real DeepSpeed loads with optimizer states (strictly) and trains on.
  CKPTDOC_EXPECT_EXIT(test::run_cli({"convert", snap, "-o", dir.file("resumed")}), 0);
  const auto load = realds::load(dir.file("resumed"), like, {"--strict"}, 2, ds);
  REALDS_EXPECT_STRICT(load);
}

void check_guard(const std::string& src, const std::string& cfg, bool shared) {
  const auto e = realds::checkpoint(src);
  test::TempDir dir;
  for (const char* mode : {"seedbug", "healthy"}) {
    const std::string out = dir.file(std::string(mode) + ".json");
    auto args =
        std::vector<std::string>{hook_driver(), "guard", "--src", e.save_dir, "--mode", mode, "--json", out};
    for (const auto& a : model_args(QString::fromStdString(cfg))) args.push_back(a);
    if (shared) args.insert(args.end(), {"--work-dir", dir.file(std::string("work-") + mode)});
    CKPTDOC_EXPECT_EXIT(realds::launch(args, 2, "0.12.6", dir.file("logs")), 0);
    const auto ranks = json_file(out)["ranks"].toArray();
    QCOMPARE(ranks.size(), 2);
    for (const auto& rv : ranks) {
      const auto r = rv.toObject();
      QVERIFY2(r["changed"].toArray().isEmpty(), "guard changed training state");
      if (std::string(mode) == "seedbug") {
        QVERIFY2(r["raised"].toBool(), "guard did not raise on the #762 state");
        QVERIFY2(r["message"].toString().contains("fp32-master-mismatch"),
                 qPrintable(r["message"].toString()));
      } else {
        QVERIFY2(!r["raised"].toBool(), qPrintable(r["message"].toString()));
        QVERIFY(!r["train_log"].toArray().isEmpty());
        QVERIFY(std::isfinite(r["train_log"].toArray()[0].toObject()["loss"].toDouble()));
      }
    }
  }
  if (shared) QVERIFY(fs::exists(dir.file("work-healthy/guard-step5/manifest.json")));  // kept where asked
}

}  // namespace

// One test function per configuration: each is its own ctest entry with its own time limit.
class TestRealdsSnapshot : public QObject {
  Q_OBJECT

 private slots:
  void zero1Fp16() {
    REALDS_REQUIRE();
    check_snapshot_is_the_checkpoint("1,fp16", "z1_fp16_dp2", "0.12.6");
  }
  void zero2Fp16() {
    REALDS_REQUIRE();
    check_snapshot_is_the_checkpoint("2,fp16", "z2_fp16_dp2", "0.12.6");
  }
  void zero2Bf16() {
    REALDS_REQUIRE();
    check_snapshot_is_the_checkpoint("2,bf16", "z2_bf16_dp2", "0.12.6");
  }
  void zero3Fp16() {
    REALDS_REQUIRE();
    check_snapshot_is_the_checkpoint("3,fp16", "z3_fp16_dp2", "0.12.6");
  }
  void zero3Bf16() {
    REALDS_REQUIRE();
    check_snapshot_is_the_checkpoint("3,bf16", "z3_bf16_dp3_fresh", "0.12.6");
  }
  void bf16Optimizer() {
    REALDS_REQUIRE();
    check_snapshot_is_the_checkpoint("1,bf16,bf16opt", "bf16opt_s1_dp2", "0.12.6");
  }
  void zero2Fp16TiedAndFrozen() {
    REALDS_REQUIRE();
    check_snapshot_is_the_checkpoint("2,fp16,edge", "z2_fp16_dp3_edge", "0.12.6");
  }
  void zero2Fp16V0145() {
    REALDS_REQUIRE();
    check_snapshot_is_the_checkpoint("2,fp16", "v145_z2_fp16_dp2", "0.14.5");
  }

  // The #762 state: a fresh engine loads a trained checkpoint without optimizer states. guard raises on every
  // rank before the first step; on a healthy load it passes and training goes on.
  void guardZero2Fp16() {  // no shared work_dir: the parts travel to rank 0 over torch.distributed
    REALDS_REQUIRE();
    check_guard("z2_fp16_dp2", "2,fp16", false);
  }
  void guardZero2Bf16SharedWorkDir() {
    REALDS_REQUIRE();
    check_guard("z2_bf16_dp2", "2,bf16", true);
  }
  void guardBf16Optimizer() {
    REALDS_REQUIRE();
    check_guard("bf16opt_s1_dp2", "1,bf16,bf16opt", false);
  }

  // every(steps=1, keep=2) in a training run, ckptdoc watch beside it: a line per step in order, the rotated
  // snapshots reported removed, and the folder holds the newest two. Each step waits until watch showed the
  // previous snapshot (a gate file), so the test never depends on timing.
  void everyAndWatchFollowARun() {
    REALDS_REQUIRE();
    test::TempDir dir;
    fs::create_directories(dir.file("run"));
    test::WatchProcess watch({"watch", dir.file("run"), "--json", "--count", "4", "--device", "cpu"});
    QProcess train;
    QStringList args{QString::fromStdString(test::source_dir() + "/tests/realds/realds.py")};
    if (const char* c = std::getenv("CKPTDOC_REALDS_CACHE")) args << "--cache" << c;
    if (const char* s = std::getenv("CKPTDOC_SHARED")) args << "--shared" << s;
    args << "launch"
         << "--world"
         << "2"
         << "--logdir" << QString::fromStdString(dir.file("logs")) << "--"
         << QString::fromStdString(hook_driver()) << "every"
         << "--stage"
         << "2"
         << "--dtype"
         << "fp16"
         << "--out" << QString::fromStdString(dir.file("run")) << "--steps"
         << "4"
         << "--every"
         << "1"
         << "--keep"
         << "2"
         << "--gate" << QString::fromStdString(dir.file("gate"));
    train.start(QString::fromStdString(test::python()), args);
    QVERIFY(train.waitForStarted(30000));
    for (int step = 1; step <= 4; ++step) {
      test::write_text(dir.file("gate." + std::to_string(step - 1)), "go");
      const auto s = watch.next_event("snapshot");
      QVERIFY2(!s.isEmpty(), watch.seen().c_str());
      QCOMPARE(s["global_steps"].toInt(), step);
      QCOMPARE(s["tag"].toString(), QString("step%1").arg(step));
      QVERIFY2(s["worst"].isNull() || s["worst"].toString() == "info", watch.seen().c_str());
      QCOMPARE(s["nonfinite_values"].toInt(), 0);
    }
    QVERIFY(train.waitForFinished(600000));
    QVERIFY2(train.exitCode() == 0, train.readAllStandardError().toStdString().c_str());
    QCOMPARE(watch.finish(), 0);
    QVERIFY2(watch.seen().find("\"event\":\"removed\",\"tag\":\"step1\"") != std::string::npos,
             watch.seen().c_str());
    std::set<std::string> left;
    for (const auto& d : fs::directory_iterator(dir.file("run"))) left.insert(d.path().filename().string());
    QCOMPARE(left, (std::set<std::string>{"step3", "step4"}));
  }
};

CKPTDOC_TEST_MAIN(TestRealdsSnapshot)
#include "test_realds_snapshot.moc"
