// DeepSpeed 0.19's AutoEP under ZeRO-3 (matrix entries v019_autoep_z3 and v019_autoep_z3_w4,
// tests/realds/autoep_train.py): each rank keeps num_experts / ep of the experts under the same param names
// (ds_autoep_layers records the placement) and ZeRO-3 partitions that sub-group over the expert-data-parallel
// group alone (ds_zero_partition_groups: 1 rank at world 2, 2 ranks at world 4; the dense sub-groups over
// dp). 0.19 loads it, its zero_to_fp32.py refuses it; the reference of the export is what the loaded 0.19
// engine gathers itself (safe_get_full_fp32_param over each param's partition group, experts then gathered
// over the expert-parallel group in placement order), and 0.19's ds_to_universal.py agrees with it. Before,
// every ckptdoc command refused the layout (layout-unsupported): no group was listed, diagnose exited 1 and
// export 2. Now inspect lists each expert-parallel rank's experts, diagnose finds nothing wrong and export
// equals the engine's model bit for bit; repair and convert refuse it by name. Derived (a real 0.19 ZeRO-3
// job's files with ds_zero_partition_groups added by partition_groups_edit.py, no expert placement): counts
// equal to dp read as before, one sub-group's count below dp still refused.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

std::string with_partition_groups(const realds::Entry& e, const test::TempDir& dir,
                                  const std::string& counts) {
  const std::string ckpt = realds::copy_of(e, dir, "counts-" + counts);
  const auto r = realds::python_with_deepspeed(
      {test::source_dir() + "/tests/realds/partition_groups_edit.py", ckpt, "--counts", counts}, e.ds);
  if (r.exit_code != 0) throw std::runtime_error("partition_groups_edit.py failed:\n" + realds::describe(r));
  return ckpt;
}

QJsonObject run_json(const realds::Entry& e) {
  return realds::parse(test::read_text(fs::path(e.save_dir).parent_path().string() + "/ref/run.json"));
}

// The export (fp32 masters, float32) against the model the loaded 0.19 engine gathered: the same names,
// shapes, dtype and bits (par_edit.py equal).
void export_equals_engine(const realds::Entry& e, const test::TempDir& dir) {
  const std::string out = dir.file(e.name + ".pt");
  CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", out}), 0);
  const auto r = realds::python_with_deepspeed(
      {test::source_dir() + "/tests/realds/par_edit.py", "equal", out, realds::reference(e.name, "fp32")},
      e.ds);
  QVERIFY2(r.exit_code == 0, realds::describe(r).c_str());
}

// inspect --json's groups: the dense ones over every dp rank, then one expert group per expert-parallel rank
// over its expert-data-parallel ranks, its params named with their global experts.
void expect_groups(const QJsonObject& inspect, int dp, const std::vector<std::vector<int>>& expert_ranks,
                   const std::vector<QString>& expert_names) {
  const auto groups = inspect["groups"].toArray();
  QCOMPARE(groups.size(), static_cast<qsizetype>(2 + expert_ranks.size()));
  for (qsizetype i = 0; i < groups.size(); ++i) {
    const auto g = groups[i].toObject();
    std::vector<int> ranks;
    for (const auto& p : g["partitions"].toArray()) ranks.push_back(p.toObject()["rank"].toInt());
    const bool expert = i >= 2;
    QCOMPARE(g["expert"].toBool(), expert);
    if (!expert) {
      QCOMPARE(static_cast<int>(ranks.size()), dp);
      continue;
    }
    const auto e = static_cast<size_t>(i - 2);
    QCOMPARE(g["ep"].toInt(), static_cast<int>(e));
    QCOMPARE(g["file_group"].toInt(), 2);
    QCOMPARE(ranks, expert_ranks[e]);
    const auto first = g["params"].toArray()[0].toObject();
    QCOMPARE(first["name"].toString(), expert_names[e]);
    QCOMPARE(first["autoep"].toObject()["param"].toString(), QString("layers.0.mlp.experts.w1"));
  }
}

// diagnose: no error or warning (no false alarm), every param's masters and moments read, the experts said
// to have no weight to compare with.
void expect_clean_diagnosis(const realds::Entry& e) {
  const auto report = realds::diagnose_json(e.save_dir, 0);
  QVERIFY2(realds::codes(report, "error").empty() && realds::codes(report, "warning").empty(),
           qPrintable(QJsonDocument(report["findings"].toArray()).toJson()));
  QVERIFY(realds::has_code(report, "info", "autoep-layout"));
  const auto verdict = report["verdict"].toObject();
  QCOMPARE(verdict["moments_checked"].toInt(), 21);  // 9 dense params + 6 expert params x 2 ep ranks
  QCOMPARE(verdict["masters_compared"].toInt(), 0);  // no 16-bit weight in the files
  bool experts_said = false;
  for (const auto& s : verdict["not_checked"].toArray())
    experts_said =
        experts_said || s.toString().contains("AutoEP experts: the model files hold no expert weight");
  QVERIFY2(experts_said, qPrintable(QJsonDocument(verdict).toJson()));
}

}  // namespace

class TestRealdsAutoep : public QObject {
  Q_OBJECT

 private slots:
  // World 2, ep 2: each rank is its own expert-data-parallel group (the expert sub-group over 1 rank).
  void realAutoepZero3IsRead() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_autoep_z3");
    // What 0.19 itself does with it (autoep_train.py): a fresh engine loads it, zero_to_fp32.py refuses it,
    // ds_to_universal.py converts it to what the loaded engine holds.
    const auto run = run_json(e);
    QVERIFY2(run["loaded"].toBool(), "0.19's load_checkpoint did not load its own AutoEP save");
    QVERIFY(run["zero_to_fp32_rc"].toInt() != 0);
    QVERIFY2(run["zero_to_fp32_error"].toString().contains("AutoEP"),
             qPrintable(run["zero_to_fp32_error"].toString()));
    QVERIFY2(run["universal_rc"].toInt() == 0 && run["universal_differ"].toArray().isEmpty(),
             qPrintable(QJsonDocument(run).toJson()));

    const auto inspect = realds::parse(test::run_cli({"inspect", e.save_dir, "--json"}).out);
    expect_groups(inspect, 2, {{0}, {1}},
                  {"layers.0.mlp.experts.w1 [experts 0-1 on ep rank 0]",
                   "layers.0.mlp.experts.w1 [experts 2-3 on ep rank 1]"});
    if (QTest::currentTestFailed()) return;  // a helper's QCOMPARE returns from the helper only
    const auto autoep = inspect["autoep"].toObject();
    QCOMPARE(autoep["ep_size"].toInt(), 2);
    QCOMPARE(autoep["edp_size"].toInt(), 1);
    QCOMPARE(QJsonDocument(autoep["layers"].toArray()[1].toObject()["experts_of_rank"].toArray())
                 .toJson(QJsonDocument::Compact),
             QByteArray("[[0,1],[2,3]]"));

    expect_clean_diagnosis(e);
    if (QTest::currentTestFailed()) return;
    test::TempDir dir;
    export_equals_engine(e, dir);
    if (QTest::currentTestFailed()) return;

    // Not repaired or converted: refused by name, nothing written.
    const auto rep = realds::repair(e.save_dir, dir.file("repaired"), {"--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(rep, 2);
    QVERIFY2(rep.err.find("AutoEP") != std::string::npos, rep.err.c_str());
    QVERIFY(!fs::exists(dir.file("repaired")));
    const auto conv =
        test::run_cli({"convert", e.save_dir, "--to", "universal", "-o", dir.file("universal")});
    CKPTDOC_EXPECT_EXIT(conv, 2);
    QVERIFY2(conv.err.find("AutoEP") != std::string::npos, conv.err.c_str());
    QVERIFY(!fs::exists(dir.file("universal")));
  }

  // World 4, ep 2, 6 experts of odd sizes: the expert sub-group of ep rank 0 over dp ranks {0, 2}, of ep rank
  // 1 over {1, 3}, with padding (3 x 7 x 9 = 189 elements in halves of 95); the dense ones over 4 ranks.
  void realAutoepZero3OverExpertDataParallelRanks() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_autoep_z3_w4");
    const auto run = run_json(e);
    QVERIFY(run["loaded"].toBool());
    QVERIFY2(run["universal_rc"].toInt() == 0 && run["universal_differ"].toArray().isEmpty(),
             qPrintable(QJsonDocument(run).toJson()));

    const auto inspect = realds::parse(test::run_cli({"inspect", e.save_dir, "--json"}).out);
    expect_groups(inspect, 4, {{0, 2}, {1, 3}},
                  {"layers.0.mlp.experts.w1 [experts 0-2 on ep rank 0]",
                   "layers.0.mlp.experts.w1 [experts 3-5 on ep rank 1]"});
    if (QTest::currentTestFailed()) return;
    const auto experts = inspect["groups"].toArray()[2].toObject();
    QCOMPARE(experts["partition_numel"].toInt(), 570);
    QCOMPARE(experts["partitions"].toArray()[1].toObject()["padding"].toInt(), 6);
    QCOMPARE(inspect["autoep"].toObject()["edp_size"].toInt(), 2);

    expect_clean_diagnosis(e);
    if (QTest::currentTestFailed()) return;
    test::TempDir dir;
    export_equals_engine(e, dir);
    if (QTest::currentTestFailed()) return;
  }

  // Damage on one rank is found where it is: dp rank 2's masters all NaN (damage.py) at world 4 are its
  // partitions of the dense params and of ep rank 0's experts (dp rank 2 is ep rank 0's second
  // expert-data-parallel rank), never of ep rank 1's.
  void nanOnOneRankNamesItsExperts() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_autoep_z3_w4");
    test::TempDir dir;
    const std::string ckpt = realds::copy_of(e, dir, "nan");
    const auto r = realds::python_with_deepspeed(
        {test::source_dir() + "/tests/realds/damage.py", ckpt, "nan-fp32", "2"}, e.ds);
    QVERIFY2(r.exit_code == 0, realds::describe(r).c_str());
    const auto report = realds::diagnose_json(ckpt, 1);
    const auto f = realds::finding(report, "nonfinite-values");
    QCOMPARE(f["severity"].toString(), QString("error"));
    QStringList params;
    for (const auto& p : f["params"].toArray()) params << p.toString();
    QVERIFY2(params.contains("layers.1.mlp.experts.w2 [experts 0-2 on ep rank 0]") &&
                 params.contains("embed.weight") && !params.join("|").contains("on ep rank 1"),
             qPrintable(params.join(", ")));
    QCOMPARE(f["ranks"].toArray(), QJsonArray{2});
  }

  // Derived from the real entry: a placement that puts expert 2 on both expert-parallel ranks (DeepSpeed's
  // descriptors allow it; which copy the whole model holds is then a choice) is refused, not laid out.
  void repeatedExpertIsRefused() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_autoep_z3");
    test::TempDir dir;
    const std::string ckpt = realds::copy_of(e, dir, "repeated");
    const auto r = realds::python_with_deepspeed(
        {test::source_dir() + "/tests/realds/autoep_edit.py", ckpt, "--placement", "0,1,2;2,3"}, e.ds);
    QVERIFY2(r.exit_code == 0, realds::describe(r).c_str());
    const auto report = realds::diagnose_json(ckpt, 1);
    QCOMPARE(realds::codes(report, "error"), std::vector<std::string>{"layout-unsupported"});
    const QString msg = realds::finding(report, "layout-unsupported")["message"].toString();
    QVERIFY2(msg.contains("expert 2 is placed on 2 expert-parallel ranks"), qPrintable(msg));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ckpt, "-o", dir.file("x.safetensors")}), 2);
  }

  // Derived from a real 0.19 ZeRO-3 job: the key alone changes nothing; a sub-group partitioned over fewer
  // ranks than dp, with no expert placement in the model files, is refused, never laid out with dp.
  void partitionCountsDecide() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_z3_fp16_dp2");
    test::TempDir dir;
    const auto same = realds::diagnose_json(with_partition_groups(e, dir, "2"), 0);
    QVERIFY2(realds::codes(same, "error").empty() && realds::codes(same, "warning").empty(),
             qPrintable(QJsonDocument(same["findings"].toArray()).toJson()));
    QVERIFY(!realds::has_code(same, "error", "layout-unsupported"));

    const std::string fewer_ckpt = with_partition_groups(e, dir, "2,1");
    const auto fewer = realds::diagnose_json(fewer_ckpt, 1);
    QCOMPARE(realds::codes(fewer, "error"), std::vector<std::string>{"layout-unsupported"});
    const QString msg = realds::finding(fewer, "layout-unsupported")["message"].toString();
    QVERIFY2(msg.contains("sub-group 1 over 1 rank") && msg.contains("ds_autoep_layers of dp rank 0"),
             qPrintable(msg));
    QVERIFY(
        realds::parse(test::run_cli({"inspect", fewer_ckpt, "--json"}).out)["groups"].toArray().isEmpty());
    const auto ex = test::run_cli({"export", fewer_ckpt, "-o", dir.file("fewer.safetensors")});
    CKPTDOC_EXPECT_EXIT(ex, 2);
    QVERIFY(!fs::exists(dir.file("fewer.safetensors")));
  }
};

QTEST_GUILESS_MAIN(TestRealdsAutoep)
#include "test_realds_autoep.moc"
