// megatron-core 0.15's torch_dist saves (#28): 0.15 pickles `.metadata` as its own MCoreMetadata (torch's
// Metadata and a field `mcore_data`) and, under the DistributedOptimizer's param_state_sharding_type
// fully_sharded_model_space, saves each rank's flattened range of the mains and moments "nd-flattened" (the
// stored shape: fragments along each axis of the original shape, then one fragment's elements; mcore_data
// names the original shape). realds.py's *_mcore015 entries are megatron_optim_train.py's tiny TP 2 GPTModel
// saved by megatron-core 0.15.3 itself (megatron_015_shims.py: its import's CUDA build off, numpy.product).
// What is right is megatron-core 0.15.3's own resume of each save (megatron_load_check.py,
// megatron_bucket_load_check.py: which fp32 mains round to their bf16 weights). main called every such save
// `[corrupt] ... not a PyTorch Distributed Checkpoint Metadata (found ...MCoreMetadata)`.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kMcore = "0.15.3";  // scripts/judges-extra-megatron-core.txt
constexpr const char* kLocal = "v019_megatron_bf16_local_mcore015";
constexpr const char* kDistOpt = "v019_megatron_bf16_distopt_mcore015";
constexpr const char* kModelSpace = "v019_megatron_bf16_model_space_mcore015";
constexpr const char* kModelSpaceStale = "v019_megatron_bf16_model_space_mcore015_stale";

// megatron-core 0.15.3's resume of `iter` on 2 ranks: its loads[iter] (mains_equal_weights, mains_differ,
// ...) and whether a step ran, or an empty object on failure.
QJsonObject megatron_resume(const std::string& iter, const QString& sharding, const test::TempDir& dir,
                            bool* step_ok = nullptr) {
  std::vector<std::string> args;
  if (sharding == "local")
    args = {test::source_dir() + "/tests/realds/megatron_load_check.py", "--ckpt", iter, "--json",
            dir.file("load.json")};
  else
    args = {test::source_dir() + "/tests/realds/megatron_bucket_load_check.py",
            "--ckpt",
            iter,
            "--sharding",
            sharding.toStdString(),
            "--json",
            dir.file("load.json")};
  const auto r = realds::launch_with_megatron_core(args, 2, kMcore, dir.file("logs"));
  if (r.exit_code != 0) {
    qWarning("%s", realds::describe(r).c_str());
    return {};
  }
  const auto j = realds::parse(test::read_text(dir.file("load.json")));
  if (step_ok) *step_ok = j["step_ok"].toBool();
  return j["loads"].toObject()[QString::fromStdString(iter)].toObject();
}

}  // namespace

class TestRealdsMegatron015 : public QObject {
  Q_OBJECT

 private slots:
  // Each optimizer layout after 2 steps: read whole, every fp32 main compared with its bf16 weight and found
  // its rounding, as megatron-core's own resume finds; MCoreMetadata is a class ckptdoc knows (no
  // unsafe-pickle warning), nothing else is said.
  void healthySavesAreReadAndCompared_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<QString>("sharding");  // the optimizer's layout, as the judge loads it
    QTest::addColumn<QString>("prefix");
    QTest::newRow("Float16OptimizerWithFloat16Params") << kLocal << "local"
                                                       << "optimizer.state.fp32_param.";
    QTest::newRow("DistributedOptimizer fully_reshardable") << kDistOpt << "fully_reshardable"
                                                            << "optimizer.state.param.";
    QTest::newRow("DistributedOptimizer fully_sharded_model_space (nd-flattened)")
        << kModelSpace << "fully_sharded_model_space"
        << "optimizer.state.fp32_param.";
  }
  void healthySavesAreReadAndCompared() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(QString, sharding);
    QFETCH(QString, prefix);
    const auto e = realds::checkpoint(entry.toStdString());
    test::TempDir dir;
    const auto truth = megatron_resume(realds::megatron_iteration_dir(e), sharding, dir);
    QVERIFY(!truth.isEmpty());
    QVERIFY(!truth["mains_equal_weights"].toArray().isEmpty());
    QVERIFY(truth["mains_differ"].toArray().isEmpty());

    const auto diag = test::run_cli({"diagnose", e.save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(diag, 0);
    const auto report = realds::parse(diag.out);
    QVERIFY2(report["problems"].toArray().isEmpty(), diag.out.c_str());
    QVERIFY2(report["findings"].toArray().isEmpty(), diag.out.c_str());  // no unsafe-pickle warning either
    const auto mains = report["megatron"].toObject()["main_params"].toObject();
    QCOMPARE(mains["compared"].toInt(), 17);
    QCOMPARE(mains["prefix"].toString(), prefix);
    QVERIFY(report["verdict"].toObject()["clean"].toBool());
    for (const auto& n : report["verdict"].toObject()["not_checked"].toArray())
      QVERIFY2(!n.toString().contains("fp32-main-param"), qPrintable(n.toString()));

    // inspect lists the keys as stored, an nd-flattened one with the shape it was flattened from
    const auto listed = test::run_cli({"inspect", e.save_dir});
    CKPTDOC_EXPECT_EXIT(listed, 0);
    const auto at = listed.out.find(prefix.toStdString() + "output_layer.weight");
    QVERIFY2(at != std::string::npos, listed.out.c_str());
    const auto line = listed.out.substr(at, listed.out.find('\n', at) - at);
    if (sharding == "fully_sharded_model_space")
      QVERIFY2(line.find("[2, 1, 512]") != std::string::npos &&
                   line.find("(nd-flattened from [64, 16])") != std::string::npos,
               line.c_str());
    else
      QVERIFY2(line.find("[64, 16]") != std::string::npos && line.find("nd-flattened") == std::string::npos,
               line.c_str());
  }

  // The --finetune bug (Megatron-LM #174) in the nd-flattened layout: the mains left at their initial values
  // are named, all 17 keys, as megatron-core finds them (none of its 58 per-rank mains rounds to its weight);
  // repair --refresh-fp32 writes each chunk's fragment run of the upcast weight, and megatron-core's resume
  // of the output finds every main equal to its weight and steps.
  void staleNdFlattenedMainsAreNamedAndRefreshed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kModelSpaceStale);
    test::TempDir dir;
    const auto truth = megatron_resume(realds::megatron_iteration_dir(e), "fully_sharded_model_space", dir);
    QVERIFY(!truth.isEmpty());
    QVERIFY(truth["mains_equal_weights"].toArray().isEmpty());
    QCOMPARE(truth["mains_differ"].toArray().size(), 58);  // 29 params on each tensor rank

    const auto diag = test::run_cli({"diagnose", e.save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(diag, 1);
    const auto report = realds::parse(diag.out);
    const auto problems = report["problems"].toArray();
    QCOMPARE(problems.size(), qsizetype{1});
    const auto p = problems[0].toObject();
    QCOMPARE(p["code"].toString(), QString("fp32-master-mismatch"));
    QVERIFY2(
        p["message"].toString().contains("(optimizer.state.fp32_param.<key>) of 17 of 17 trainable params"),
        qPrintable(p["message"].toString()));

    const auto out = dir.file("refreshed");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto after = test::run_cli({"diagnose", out, "--json"});
    CKPTDOC_EXPECT_EXIT(after, 0);
    QCOMPARE(realds::parse(after.out)["megatron"].toObject()["main_params"].toObject()["compared"].toInt(),
             17);
    test::TempDir judge;
    bool step_ok = false;
    const auto loaded = megatron_resume(out + "/iter_0000000", "fully_sharded_model_space", judge, &step_ok);
    QCOMPARE(loaded["mains_equal_weights"].toArray().size(), 58);
    QVERIFY(loaded["mains_differ"].toArray().isEmpty());
    QVERIFY(step_ok);
  }
};

QTEST_GUILESS_MAIN(TestRealdsMegatron015)
#include "test_realds_megatron_015.moc"
