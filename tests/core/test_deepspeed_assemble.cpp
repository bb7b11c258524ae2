// Lazy tensor access on the real fixtures: per-rank fp32 partitions and moments, module lp weights and
// assembled params, each compared with the sha256 DeepSpeed's own run recorded.
#include <QtTest>

#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "deepspeed_reference.h"

using namespace ckptdoc;
using namespace ckptdoc::deepspeed;

class TestDeepspeedAssemble : public QObject {
  Q_OBJECT

 private slots:
  void fixtures_data() {
    QTest::addColumn<QString>("name");
    for (const auto& n : test::deepspeed_fixture_names())
      QTest::newRow(n.c_str()) << QString::fromStdString(n);
  }

  void fp32PartitionsAndMoments_data() { fixtures_data(); }
  void fp32PartitionsAndMoments() {
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    const auto optim = test::fixture_reference(n)["optim_states"].toObject();
    const auto ck = Checkpoint::open(test::deepspeed_fixture(n) + "/checkpoint");
    for (int r = 0; r < 2; ++r) {
      const auto o = optim[QString::number(r)].toObject();
      const auto parts = o["fp32_partitions"].toArray();
      const auto inner = o.contains("base_optimizer_state") ? o["base_optimizer_state"].toObject()
                                                            : o["optimizer_state_dict"].toObject();
      for (qsizetype g = 0; g < parts.size(); ++g) {
        const auto t = ck->fp32_partition(static_cast<int>(g), r);
        QVERIFY(t.has_value());
        QCOMPARE(t->numel(), parts[g].toObject()["numel"].toInteger());
        QCOMPARE(test::tensor_sha256(*t), parts[g].toObject()["sha256"].toString().toStdString());
        const auto st = inner["state"].toObject()[QString::number(g)].toObject();
        for (const char* key : {"exp_avg", "exp_avg_sq"}) {
          const auto m = ck->moment_partition(static_cast<int>(g), r, key);
          QVERIFY(m.has_value());
          QCOMPARE(test::tensor_sha256(*m),
                   st[key].toObject()["tensor_stats"].toObject()["sha256"].toString().toStdString());
        }
      }
    }
  }

  void lpWeights_data() { fixtures_data(); }
  void lpWeights() {
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    const auto module = test::fixture_reference(n)["model_states"].toObject()["module"].toObject();
    const auto ck = Checkpoint::open(test::deepspeed_fixture(n) + "/checkpoint");
    for (const auto& g : ck->catalog().groups) {
      for (const auto& p : g.params) {
        const auto lp = ck->lp_param(p.name);
        if (ck->catalog().wrapper == OptimizerWrapper::Zero3) {
          QVERIFY2(!lp.has_value(), "ZeRO-3 module entries are placeholders");
          continue;
        }
        QVERIFY(lp.has_value());
        QCOMPARE(lp->shape, p.shape);
        QCOMPARE(test::tensor_sha256(*lp),
                 module[QString::fromStdString(p.name)].toObject()["sha256"].toString().toStdString());
      }
    }
  }

  void assembledFp32MatchesZeroToFp32_data() {
    QTest::addColumn<QString>("name");
    for (const auto& n : test::deepspeed_fixture_names())
      if (n.rfind("bf16opt", 0) != 0) QTest::newRow(n.c_str()) << QString::fromStdString(n);
  }
  void assembledFp32MatchesZeroToFp32() {
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    const auto tensors =
        test::read_json_file(test::deepspeed_fixture(n) + "/checkpoint.zero_to_fp32.tensors.json")["tensors"]
            .toArray();
    std::map<std::string, std::string> sha;
    for (const auto& t : tensors)
      sha[t.toObject()["name"].toString().toStdString()] = t.toObject()["sha256"].toString().toStdString();
    const auto ck = Checkpoint::open(test::deepspeed_fixture(n) + "/checkpoint");
    int checked = 0;
    for (const auto& g : ck->catalog().groups) {
      for (size_t i = 0; i < g.params.size(); ++i) {
        const ParamData d = ck->assemble(g.index, static_cast<int>(i));
        QCOMPARE(static_cast<int64_t>(d.fp32.size()), g.params[i].numel);
        QCOMPARE(static_cast<int64_t>(d.exp_avg.size()), g.params[i].numel);
        QCOMPARE(static_cast<int64_t>(d.exp_avg_sq.size()), g.params[i].numel);
        QCOMPARE(test::floats_sha256(d.fp32), sha.at(d.name));
        ++checked;
      }
    }
    QCOMPARE(checked, 8);
  }

  void assembledMomentsAreTheRightSlices() {
    // fc2.weight spans both ranks in ZeRO-2: its exp_avg is rank 0's tail then rank 1's head.
    const auto ck = Checkpoint::open(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint");
    const auto gp = ck->catalog().find_param("fc2.weight");
    QVERIFY(gp.has_value());
    const ParamData d = ck->assemble(gp->first, gp->second);
    const auto r0 = ck->moment_partition(0, 0, "exp_avg")->to_float();
    const auto r1 = ck->moment_partition(0, 1, "exp_avg")->to_float();
    QCOMPARE(d.exp_avg[0], r0[28896]);
    QCOMPARE(d.exp_avg[12713], r0[41609]);
    QCOMPARE(d.exp_avg[12714], r1[0]);
    QCOMPARE(d.exp_avg.back(), r1[39358]);
  }
};

CKPTDOC_TEST_MAIN(TestDeepspeedAssemble)
#include "test_deepspeed_assemble.moc"
