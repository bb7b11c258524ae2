// Megatron-core's DistributedOptimizer in its fully_reshardable layout (#28: optimizer.state.{param,exp_avg,
// exp_avg_sq}.<model key>, --dist-ckpt-optim-fully-reshardable) judged by megatron-core 0.16.1's own resume
// (megatron_bucket_load_check.py --sharding fully_reshardable: dist_checkpointing.load of a fresh model's and
// DistributedOptimizer's sharded state dicts, load_state_dict, one step). With torch's Adam (no Apex/TE on
// the CPU) that load raises KeyError 'step' in 0.16.1 and 0.18.0 (a megatron-core bug the judge answers with
// one shim: the checker says which); the mains it places are compared with their loaded bf16 weights per
// tensor rank. Entries: v019_megatron_bf16_distopt (2 steps, healthy) and v019_megatron_bf16_distopt_stale (a
// --finetune-style run from it with the same optimizer and layout, no reload_model_params, saved before a
// step: megatron_distopt_finetune_train.py).
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <cstdio>
#include <filesystem>
#include <map>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kHealthy = "v019_megatron_bf16_distopt";
constexpr const char* kStale = "v019_megatron_bf16_distopt_stale";
constexpr int kParams = 17;     // model keys, each with a main
constexpr int kRankMains = 58;  // 29 params on each of the 2 tensor ranks ("tp<r>:<name>")

std::string iteration_of(const realds::Entry& e) {
  char name[32];
  std::snprintf(name, sizeof name, "/iter_%07d", std::stoi(e.tag));
  return e.save_dir + name;
}

// megatron-core's resume of iteration folder `iter` and one step: the judge's report, empty when it failed.
QJsonObject megatron_resume(const std::string& iter, const std::string& logs) {
  const auto out = logs + "/load.json";
  const auto r = realds::launch({test::source_dir() + "/tests/realds/megatron_bucket_load_check.py", "--ckpt",
                                 iter, "--sharding", "fully_reshardable", "--json", out},
                                2, "0.19", logs);
  if (r.exit_code != 0) qWarning("%s", realds::describe(r).c_str());
  return r.exit_code == 0 ? realds::parse(test::read_text(out)) : QJsonObject{};
}

QJsonObject load_of(const QJsonObject& report, const std::string& iter) {
  return report["loads"].toObject()[QString::fromStdString(iter)].toObject();
}

std::vector<std::string> problem_codes(const QJsonObject& report) {
  std::vector<std::string> out;
  for (const auto& p : report["problems"].toArray())
    out.push_back(p.toObject()["code"].toString().toStdString());
  return out;
}

std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir))
    if (f.is_regular_file())
      out[f.path().lexically_relative(dir).string()] = test::read_text(f.path().string());
  return out;
}

}  // namespace

class TestRealdsMegatronFullyReshardable : public QObject {
  Q_OBJECT

 private slots:
  // ckptdoc's verdict agrees with megatron-core's resume: the healthy save is clean and every main
  // megatron-core places rounds to its weight; the stale save is fp32-master-mismatch for all 17 and none
  // rounds.
  void diagnosisAgreesWithMegatronCore_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<bool>("stale");
    QTest::newRow("healthy") << kHealthy << false;
    QTest::newRow("stale") << kStale << true;
  }

  void diagnosisAgreesWithMegatronCore() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(bool, stale);
    const auto e = realds::checkpoint(entry.toStdString());
    test::TempDir dir;
    const auto iter = iteration_of(e);
    const auto truth = megatron_resume(iter, dir.file("logs"));
    QVERIFY(!truth.isEmpty());
    QVERIFY(truth["load_shim"].toString().contains("'step'"));
    const auto load = load_of(truth, iter);
    QCOMPARE(load["mains_equal_weights"].toArray().size(), stale ? 0 : kRankMains);
    QCOMPARE(load["mains_differ"].toArray().size(), stale ? kRankMains : 0);
    QVERIFY(truth["step_ok"].toBool());

    const auto d = test::run_cli({"diagnose", e.save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(d, stale ? 1 : 0);
    const auto report = realds::parse(d.out);
    QCOMPARE(problem_codes(report),
             stale ? std::vector<std::string>{"fp32-master-mismatch"} : std::vector<std::string>{});
    const auto mains = report["megatron"].toObject()["main_params"].toObject();
    QCOMPARE(mains["compared"].toInt(), kParams);
    QCOMPARE(mains["prefix"].toString(), QString("optimizer.state.param."));
  }

  // repair --refresh-fp32 of the stale save: a new folder (the input untouched) that ckptdoc diagnoses clean
  // and whose mains megatron-core's resume places as the weights' own values, then steps.
  void refreshedStaleSaveIsLoadedByMegatronCore() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kStale);
    const auto before = files_of(e.save_dir);
    test::TempDir dir;
    const auto out = dir.file("refreshed");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("17 params (optimizer.state.param.<key>)") != std::string::npos, r.out.c_str());
    QVERIFY(files_of(e.save_dir) == before);

    const auto d = test::run_cli({"diagnose", out, "--json"});
    CKPTDOC_EXPECT_EXIT(d, 0);
    const auto report = realds::parse(d.out);
    QVERIFY2(report["problems"].toArray().isEmpty(), d.out.c_str());
    QCOMPARE(report["megatron"].toObject()["main_params"].toObject()["compared"].toInt(), kParams);

    const auto iter = out + "/iter_0000000";
    const auto truth = megatron_resume(iter, dir.file("logs"));
    QVERIFY(!truth.isEmpty());
    const auto load = load_of(truth, iter);
    QCOMPARE(load["mains_equal_weights"].toArray().size(), kRankMains);
    QVERIFY2(load["mains_differ"].toArray().isEmpty(), qPrintable(QJsonDocument(load).toJson()));
    QVERIFY(truth["step_ok"].toBool());
  }
};

QTEST_GUILESS_MAIN(TestRealdsMegatronFullyReshardable)
#include "test_realds_megatron_fully_reshardable.moc"
