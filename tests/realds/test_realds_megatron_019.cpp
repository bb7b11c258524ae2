// megatron-core 0.19's torch_dist saves (#28): 0.19 writes no common.pt. The state that is not sharded (args,
// iteration, checkpoint_version, the optimizer's sharding type) is one ShardedObject "common_state" inside
// the DCP, the bytes item common_state/shard_0_1 holding torch.save([state]); megatron-core's
// load_common_state_dict reads common.pt when a folder has one, else that item. realds.py's *_mcore019
// entries are saved by megatron-core 0.19.2 itself (megatron_integrity_train.py, megatron_bucket_train.py and
// its
// --finetune-style stale run). What is right is megatron-core 0.19.2's own reading of each save
// (megatron_common_check.py, megatron_bucket_load_check.py, megatron_drop_check.py). main answered every 0.19
// save with `megatron-common-missing` ("common.pt is absent"), exit 1.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kMcore = "0.19.2";  // scripts/judges-extra-megatron-core.txt
constexpr const char* kModelOnly = "v019_megatron_tp2_mcore019";
constexpr const char* kBucket = "v019_megatron_bf16_distopt_dp_reshardable_mcore019";
constexpr const char* kBucketStale = "v019_megatron_bf16_distopt_dp_reshardable_stale_mcore019";
constexpr const char* kLocal = "v019_megatron_bf16_local_mcore019";

QJsonObject json_of(const test::RunResult& r) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

std::string iteration_dir(const realds::Entry& e) {
  return e.save_dir + "/iter_" + std::string(7 - e.tag.size(), '0') + e.tag;
}

// megatron-core 0.19.2's load_common_state_dict of `iter`: its keys, iteration and args type.
QJsonObject megatron_common(const std::string& iter, const test::TempDir& dir) {
  const auto r =
      realds::python_with_megatron_core({test::source_dir() + "/tests/realds/megatron_common_check.py",
                                         "--ckpt", iter, "--json", dir.file("common.json")},
                                        kMcore);
  if (r.exit_code != 0) {
    qWarning("%s", realds::describe(r).c_str());
    return {};
  }
  return realds::parse(test::read_text(dir.file("common.json")));
}

QStringList strings(const QJsonArray& a) {
  QStringList s;
  for (const auto& v : a) s << v.toString();
  return s;
}

}  // namespace

class TestRealdsMegatron019 : public QObject {
  Q_OBJECT

 private slots:
  // A healthy save of each kind: clean, with the common state read from the DCP item, its keys and iteration
  // those megatron-core's own load_common_state_dict gives, and the mains compared where there are any.
  void commonStateInTheCheckpointIsRead_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<int>("mains");
    QTest::newRow("model only, integrity.json") << kModelOnly << 0;
    QTest::newRow("DistributedOptimizer dp_reshardable") << kBucket << 58;
    QTest::newRow("Float16OptimizerWithFloat16Params") << kLocal << 17;
  }
  void commonStateInTheCheckpointIsRead() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(int, mains);
    const auto e = realds::checkpoint(entry.toStdString());
    const auto iter = iteration_dir(e);
    QVERIFY(!std::filesystem::exists(iter + "/common.pt"));  // what 0.19 writes
    test::TempDir dir;
    const auto truth = megatron_common(iter, dir);
    QVERIFY(!truth.isEmpty());

    const auto diag = test::run_cli({"diagnose", e.save_dir, "--json", "--verify-checksums"});
    CKPTDOC_EXPECT_EXIT(diag, 0);
    const auto report = json_of(diag);
    QVERIFY2(report["problems"].toArray().isEmpty(), diag.out.c_str());
    QVERIFY(report["verdict"].toObject()["clean"].toBool());
    const auto common = report["megatron"].toObject()["common"].toObject();
    QVERIFY(common["present"].toBool());
    QVERIFY2(common["where"].toString().startsWith("common_state/shard_0_1 (__0_0.distcp"),
             qPrintable(common["where"].toString()));
    QCOMPARE(strings(common["keys"].toArray()), strings(truth["keys"].toArray()));
    QCOMPARE(common["iteration"].toInt(), truth["iteration"].toInt());
    QCOMPARE(QString::number(common["iteration"].toInt()), QString::fromStdString(e.tag));
    QCOMPARE(common["args"].toObject()["type"].toString(), truth["args_type"].toString());
    const auto compared = report["megatron"].toObject()["main_params"].toObject()["compared"].toInt();
    QCOMPARE(compared, mains);

    const auto listed = test::run_cli({"inspect", e.save_dir});
    CKPTDOC_EXPECT_EXIT(listed, 0);
    QVERIFY2(listed.out.find("\n  common_state/shard_0_1 (__0_0.distcp") != std::string::npos,
             listed.out.c_str());
  }

  // The --finetune bug (Megatron-LM #174) in 0.19's default bucket layout: the stale mains are named, and the
  // refreshed copy is resumed by megatron-core 0.19.2 with every main equal to its weight, then a step.
  void staleMainsAreNamedAndRefreshed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kBucketStale);
    const auto diag = test::run_cli({"diagnose", e.save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(diag, 1);
    const auto problems = json_of(diag)["problems"].toArray();
    QCOMPARE(problems.size(), qsizetype{1});
    QCOMPARE(problems[0].toObject()["code"].toString(), QString("fp32-master-mismatch"));
    QVERIFY(problems[0].toObject()["message"].toString().contains("of 58 of 58 trainable params"));

    test::TempDir dir;
    const auto out = dir.file("refreshed");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto after = test::run_cli({"diagnose", out, "--json"});
    CKPTDOC_EXPECT_EXIT(after, 0);
    const auto out_iter = out + "/iter_0000000";
    const auto load = realds::launch_with_megatron_core(
        {test::source_dir() + "/tests/realds/megatron_bucket_load_check.py", "--ckpt", iteration_dir(e),
         "--ckpt", out_iter, "--json", dir.file("load.json")},
        2, kMcore, dir.file("logs"));
    QVERIFY2(load.exit_code == 0, realds::describe(load).c_str());
    const auto j = realds::parse(test::read_text(dir.file("load.json")));
    const auto loads = j["loads"].toObject();
    const auto stale = loads[QString::fromStdString(iteration_dir(e))].toObject();
    const auto fixed = loads[QString::fromStdString(out_iter)].toObject();
    QCOMPARE(stale["mains_differ"].toArray().size(), 58);  // megatron-core sees the stale mains too (2 ranks)
    QCOMPARE(fixed["mains_equal_weights"].toArray().size(), 58);
    QVERIFY2(fixed["mains_differ"].toArray().isEmpty(), qPrintable(QJsonDocument(fixed).toJson()));
    QVERIFY(j["step_ok"].toBool());
  }

  // --drop-optimizer: the optimizer's keys leave the DCP and its "optimizer" entry leaves the common_state
  // item (rewritten in the new storage file), as --no-save-optim would have saved it; megatron-core 0.19.2
  // reads the copy's common state without it and the rest the input's, loads the model bit for bit, cannot
  // load an optimizer from it, and a fresh optimizer steps.
  void dropOptimizerRewritesTheCommonState() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kBucket);
    const auto in_iter = iteration_dir(e);
    test::TempDir dir;
    const auto out = dir.file("dropped");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--drop-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto j = json_of(r);
    QCOMPARE(j["common_where"].toString(), QString("common_state/shard_0_1"));
    QCOMPARE(j["common_dropped"].toArray(), (QJsonArray{"optimizer"}));
    const auto out_iter = out + "/iter_0000002";
    QVERIFY(!std::filesystem::exists(out_iter + "/common.pt"));

    const auto load = realds::launch_with_megatron_core(
        {test::source_dir() + "/tests/realds/megatron_drop_check.py", "--in", in_iter, "--out", out_iter,
         "--json", dir.file("drop.json")},
        2, kMcore, dir.file("logs"));
    QVERIFY2(load.exit_code == 0, realds::describe(load).c_str());
    const auto t = realds::parse(test::read_text(dir.file("drop.json")));
    QCOMPARE(j["keys_dropped"].toInt(), t["optimizer_keys_in"].toInt());
    QVERIFY(t["optimizer_keys_out"].toArray().isEmpty());
    QVERIFY(t["other_keys_equal"].toBool());
    QCOMPARE(t["common_dropped"].toArray(), (QJsonArray{"optimizer"}));
    QVERIFY(t["common_rest_equal"].toBool());
    QVERIFY(t["weights_differ"].toArray().isEmpty());
    QVERIFY(t["weights_equal"].toInt() > 0);
    QVERIFY2(!t["optimizer_load_error"].isNull(), "megatron-core loaded an optimizer from the output");
    QVERIFY(t["step_ok"].toBool());
  }

  // --reset-optimizer where 0.19 keeps the step in the common_state item (the non-distributed optimizer):
  // refused by name, nothing written; in bucket space the step lives in the DCP's own param-groups objects,
  // so the reset runs and megatron-core 0.19.2 resumes zero moments and step 0 from it.
  void resetOptimizer() {
    REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    const auto local = realds::checkpoint(kLocal);
    const auto refused = test::run_cli({"repair", local.save_dir, "-o", dir.file("r"), "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(refused, 2);
    QVERIFY2(refused.err.find("common_state/shard_0_1") != std::string::npos &&
                 refused.err.find("nothing was written") != std::string::npos,
             refused.err.c_str());
    QVERIFY(!std::filesystem::exists(dir.file("r")));

    const auto e = realds::checkpoint(kBucket);
    const auto out = dir.file("reset");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto in_iter = iteration_dir(e);
    const auto out_iter = out + "/iter_0000002";
    const auto load = realds::launch_with_megatron_core(
        {test::source_dir() + "/tests/realds/megatron_bucket_load_check.py", "--ckpt", in_iter, "--ckpt",
         out_iter, "--fresh-step-check", "--json", dir.file("load.json")},
        2, kMcore, dir.file("logs"));
    QVERIFY2(load.exit_code == 0, realds::describe(load).c_str());
    const auto l = realds::parse(test::read_text(dir.file("load.json")));
    const auto loads = l["loads"].toObject();
    QVERIFY(loads[QString::fromStdString(in_iter)]
                .toObject()["adam_state"]
                .toObject()["moments_max_abs"]
                .toDouble() > 0);
    QCOMPARE(loads[QString::fromStdString(out_iter)]
                 .toObject()["adam_state"]
                 .toObject()["moments_max_abs"]
                 .toDouble(),
             0.0);
    QCOMPARE(loads[QString::fromStdString(out_iter)].toObject()["group_steps"].toArray(), (QJsonArray{0.0}));
    QCOMPARE(l["mains_equal"].toInt(), 29);
    QVERIFY(l["step_ok"].toBool());
  }
};

QTEST_GUILESS_MAIN(TestRealdsMegatron019)
#include "test_realds_megatron_019.moc"
