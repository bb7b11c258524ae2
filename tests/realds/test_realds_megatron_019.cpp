// megatron-core 0.19's torch_dist saves (#28): 0.19 writes no common.pt. The state that is not sharded (args,
// iteration, checkpoint_version, the optimizer's sharding type) is one ShardedObject "common_state" inside
// the DCP, the bytes item common_state/shard_0_1 holding torch.save([state]); megatron-core's
// load_common_state_dict reads common.pt when a folder has one, else that item. realds.py's *_mcore019
// entries are saved by megatron-core 0.19.2 itself (megatron_integrity_train.py, megatron_optim_train.py,
// megatron_bucket_train.py, megatron_moe_train.py and the --finetune-style stale runs). What is right is
// megatron-core 0.19.2's own reading of each save (megatron_common_check.py, megatron_bucket_load_check.py,
// megatron_load_check.py, megatron_drop_check.py). main answered every 0.19 save with
// `megatron-common-missing` ("common.pt is absent"), exit 1. 0.19.2 cannot save fully_sharded_model_space
// (its own sharded_param_state_fs_model_space raises "ShardedTensor. flattened_range is not supported"), so
// that layout has no entry here.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>

#include "megatron_drop_verdict.h"
#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kMcore = "0.19.2";  // scripts/judges-extra-megatron-core.txt
constexpr const char* kModelOnly = "v019_megatron_tp2_mcore019";
constexpr const char* kBucket = "v019_megatron_bf16_distopt_dp_reshardable_mcore019";
constexpr const char* kBucketStale = "v019_megatron_bf16_distopt_dp_reshardable_stale_mcore019";
constexpr const char* kLocal = "v019_megatron_bf16_local_mcore019";
constexpr const char* kDistOpt = "v019_megatron_bf16_distopt_mcore019";  // fully_reshardable
constexpr const char* kDistOptStale = "v019_megatron_bf16_distopt_stale_mcore019";
constexpr const char* kMoe = "v019_megatron_bf16_distopt_moe_ep2_mcore019";
constexpr const char* kMoeStale = "v019_megatron_bf16_distopt_moe_ep2_stale_mcore019";

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

// megatron-core 0.19.2's own resume of `iters` (megatron_bucket_load_check.py with `args`: the
// DistributedOptimizer's layouts), its JSON.
QJsonObject bucket_resume(const QStringList& args, const std::vector<std::string>& iters,
                          const test::TempDir& dir) {
  std::vector<std::string> argv{test::source_dir() + "/tests/realds/megatron_bucket_load_check.py"};
  for (const auto& a : args) argv.push_back(a.toStdString());
  for (const auto& i : iters) argv.insert(argv.end(), {"--ckpt", i});
  argv.insert(argv.end(), {"--fresh-step-check", "--json", dir.file("load.json")});
  const auto load = realds::launch_with_megatron_core(argv, 2, kMcore, dir.file("logs"));
  if (load.exit_code != 0) {
    qWarning("%s", realds::describe(load).c_str());
    return {};
  }
  return realds::parse(test::read_text(dir.file("load.json")));
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
    QTest::newRow("DistributedOptimizer fully_reshardable") << kDistOpt << 17;
    QTest::newRow("MoE ep2, ChainedOptimizer in bucket space") << kMoe << 57;
  }
  void commonStateInTheCheckpointIsRead() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(int, mains);
    const auto e = realds::checkpoint(entry.toStdString());
    const auto iter = realds::megatron_iteration_dir(e);
    QVERIFY(!std::filesystem::exists(iter + "/common.pt"));  // what 0.19 writes
    test::TempDir dir;
    const auto truth = megatron_common(iter, dir);
    QVERIFY(!truth.isEmpty());

    const auto diag = test::run_cli({"diagnose", e.save_dir, "--json", "--verify-checksums"});
    CKPTDOC_EXPECT_EXIT(diag, 0);
    const auto report = realds::parse(diag.out);
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

  // The healthy saves of the other DistributedOptimizer layouts: megatron-core 0.19.2's own resume finds
  // every main equal to its bf16 weight (per tensor rank), as many as diagnose compared clean above (17
  // params on each of 2 tensor ranks; the MoE save's 25 dense and 2 x 16 expert params, one dp group each).
  void healthyMainsAsMegatronResumesThem_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("mains");
    QTest::newRow("DistributedOptimizer fully_reshardable")
        << kDistOpt << QStringList{"--sharding", "fully_reshardable"} << 58;
    QTest::newRow("MoE ep2") << kMoe << QStringList{"--experts", "4", "--ep", "2", "--tp", "1"} << 57;
  }
  void healthyMainsAsMegatronResumesThem() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(QStringList, args);
    QFETCH(int, mains);
    const auto e = realds::checkpoint(entry.toStdString());
    test::TempDir dir;
    const auto j = bucket_resume(args, {realds::megatron_iteration_dir(e)}, dir);
    QVERIFY(!j.isEmpty());
    const auto load =
        j["loads"].toObject()[QString::fromStdString(realds::megatron_iteration_dir(e))].toObject();
    QCOMPARE(load["mains_equal_weights"].toArray().size(), mains);
    QVERIFY(load["mains_differ"].toArray().isEmpty());
    QVERIFY(j["step_ok"].toBool());
    const auto diag = test::run_cli({"diagnose", e.save_dir});
    CKPTDOC_EXPECT_EXIT(diag, 0);
  }

  // The --finetune bug (Megatron-LM #174) in 0.19's bucket layout (dense and MoE) and in fully_reshardable:
  // the stale mains are named, and the refreshed copy is resumed by megatron-core 0.19.2 with every main
  // equal to its weight, then a step.
  void staleMainsAreNamedAndRefreshed_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("affected");
    QTest::addColumn<int>("mains");  // as megatron-core's resume counts them (each tensor rank's)
    QTest::newRow("dp_reshardable") << kBucketStale << QStringList{} << "of 58 of 58 trainable params" << 58;
    QTest::newRow("fully_reshardable") << kDistOptStale << QStringList{"--sharding", "fully_reshardable"}
                                       << "of 17 of 17 trainable params" << 58;
    QTest::newRow("MoE ep2") << kMoeStale << QStringList{"--experts", "4", "--ep", "2", "--tp", "1"}
                             << "of 57 of 57 trainable params" << 57;
  }
  void staleMainsAreNamedAndRefreshed() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(QStringList, args);
    QFETCH(QString, affected);
    QFETCH(int, mains);
    const auto e = realds::checkpoint(entry.toStdString());
    const auto diag = test::run_cli({"diagnose", e.save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(diag, 1);
    const auto problems = realds::parse(diag.out)["problems"].toArray();
    QCOMPARE(problems.size(), qsizetype{1});
    QCOMPARE(problems[0].toObject()["code"].toString(), QString("fp32-master-mismatch"));
    QVERIFY(problems[0].toObject()["message"].toString().contains(affected));

    test::TempDir dir;
    const auto out = dir.file("refreshed");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto after = test::run_cli({"diagnose", out, "--json"});
    CKPTDOC_EXPECT_EXIT(after, 0);
    const auto out_iter = out + "/iter_0000000";
    const auto j = bucket_resume(args, {realds::megatron_iteration_dir(e), out_iter}, dir);
    QVERIFY(!j.isEmpty());
    const auto loads = j["loads"].toObject();
    const auto stale = loads[QString::fromStdString(realds::megatron_iteration_dir(e))].toObject();
    const auto fixed = loads[QString::fromStdString(out_iter)].toObject();
    QCOMPARE(stale["mains_differ"].toArray().size(), mains);  // megatron-core sees the stale mains too
    QCOMPARE(fixed["mains_equal_weights"].toArray().size(), mains);
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
    const auto in_iter = realds::megatron_iteration_dir(e);
    test::TempDir dir;
    const auto out = dir.file("dropped");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--drop-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto j = realds::parse(r.out);
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
    test::expect_megatron_drop_judged(j, t);
  }

  // --reset-optimizer of each optimizer layout 0.19 saves. Float16OptimizerWithFloat16Params (its step the
  // common_step tensor) and the DistributedOptimizer fully_reshardable (a float step in each param group)
  // keep the step in the common_state item: its record is rewritten in place in the copy (same length:
  // .metadata the input's); in bucket space the step lives in the DCP's own param-groups objects.
  // megatron-core 0.19.2 resumes each copy with zero moments, step 0 and the input's mains, and steps (the
  // non-distributed optimizer's step bit for bit a fresh torch Adam's). main refused the first two by name,
  // exit 2.
  void resetOptimizer_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<QString>("common");  // where the step was (--json common_where), empty: bucket space
    QTest::addColumn<QString>("where");
    QTest::newRow("Float16OptimizerWithFloat16Params") << kLocal << "common_state/shard_0_1 (__0_0.distcp)"
                                                       << "optimizer.optimizer.state.common_step";
    QTest::newRow("DistributedOptimizer fully_reshardable")
        << kDistOpt << "common_state/shard_0_1 (__0_0.distcp)"
        << "optimizer.optimizer.param_groups[*].step";
    QTest::newRow("DistributedOptimizer dp_reshardable") << kBucket << ""
                                                         << "";
  }
  void resetOptimizer() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(QString, common);
    QFETCH(QString, where);
    const auto e = realds::checkpoint(entry.toStdString());
    test::TempDir dir;
    const auto out = dir.file("reset");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto in_iter = realds::megatron_iteration_dir(e);
    const auto out_iter = out + "/iter_0000002";
    QCOMPARE(test::read_text(out_iter + "/.metadata"), test::read_text(in_iter + "/.metadata"));
    QVERIFY(!std::filesystem::exists(out_iter + "/common.pt"));
    if (!common.isEmpty()) {
      const auto j = realds::parse(r.out);
      QCOMPARE(j["common_where"].toString(), common);
      QCOMPARE(j["step_where"].toString(), where);
      QCOMPARE(j["step_before"].toDouble(), 2.0);
    }

    if (entry == kLocal) {  // the non-distributed optimizer: megatron_load_check.py
      const auto load = realds::launch_with_megatron_core(
          {test::source_dir() + "/tests/realds/megatron_load_check.py", "--ckpt", in_iter, "--ckpt", out_iter,
           "--fresh-step-check", "--json", dir.file("local.json")},
          2, kMcore, dir.file("logs"));
      QVERIFY2(load.exit_code == 0, realds::describe(load).c_str());
      const auto l = realds::parse(test::read_text(dir.file("local.json")));
      const auto loads = l["loads"].toObject();
      const auto before = loads[QString::fromStdString(in_iter)].toObject()["adam_state"].toObject();
      const auto after = loads[QString::fromStdString(out_iter)].toObject();
      QVERIFY(before["moments_max_abs"].toDouble() > 0);
      QCOMPARE(before["steps"].toArray(), (QJsonArray{2.0}));
      QCOMPARE(after["adam_state"].toObject()["moments_max_abs"].toDouble(), 0.0);
      QCOMPARE(after["adam_state"].toObject()["steps"].toArray(), (QJsonArray{0.0}));
      QCOMPARE(after["mains_equal_weights"].toArray().size(), 29);
      QVERIFY(after["mains_differ"].toArray().isEmpty());
      QCOMPARE(l["fresh_step"].toObject()["equal"].toInt(), 29);
      QVERIFY(l["step_ok"].toBool());
      return;
    }
    const auto args = entry == kDistOpt ? QStringList{"--sharding", "fully_reshardable"} : QStringList{};
    const auto l = bucket_resume(args, {in_iter, out_iter}, dir);
    QVERIFY(!l.isEmpty());
    const auto loads = l["loads"].toObject();
    QVERIFY(loads[QString::fromStdString(in_iter)]
                .toObject()["adam_state"]
                .toObject()["moments_max_abs"]
                .toDouble() > 0);
    QCOMPARE(loads[QString::fromStdString(in_iter)].toObject()["group_steps"].toArray(), (QJsonArray{2.0}));
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
