// The repair actions not covered elsewhere on DeepSpeed 0.19 (test_realds_v019 has the refresh and the dp 8
// re-partition chain), each accepted only when 0.19's engine.load_checkpoint loads the output, trains one
// step, and holds the values the action promised: reset (every wrapper 0.19 saves with ZeRO), drop (with the
// load the CLI's advice names), a ZeRO-3 re-partition and a graft onto a model with an added layer.
#include <QJsonArray>
#include <QJsonObject>
#include <QtTest>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

class TestRealdsRepairV019 : public QObject {
  Q_OBJECT

 private slots:
  // Empty Adam state: 0.19 loads the masters unchanged, no moment, and the next step is Adam's first.
  void resetOptimizer_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"v019_z1_fp16_dp2", "v019_z2_bf16_dp2", "v019_z3_fp16_dp2", "v019_bf16opt_s1_dp2"})
      QTest::newRow(n) << QString(n);
  }
  void resetOptimizer() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto out = dir.file("reset");
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, {"--reset-optimizer"}), 0);
    const auto c =
        realds::load(out, e.name, {"--strict", "--expect-fp32", realds::reference(e.name, "fp32")});
    REALDS_EXPECT_STRICT(c);
    QVERIFY2(!c.report["after_load_summary"].toObject()["adam_state_present"].toBool(), c.describe().c_str());
    int groups = 0;
    for (const auto& r : c.report["after_step"].toObject()["per_rank_groups"].toArray())
      for (const auto& g : r.toObject()["groups"].toArray()) {
        QCOMPARE(g.toObject()["adam"].toObject()["step"].toDouble(), 1.0);
        ++groups;
      }
    QVERIFY(groups > 0);
  }

  // Weights only. The CLI's advice for the dtype, and 0.19 doing what it says: load_optimizer_states=False
  // sets the masters from the weights (fp16 and bf16), and so does the fp16 advice's load_module_only=True.
  void dropOptimizer_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("advice");
    QTest::newRow("fp16") << "v019_z2_fp16_dp2"
                          << "load_module_only=True, load_optimizer_states=False";
    QTest::newRow("bf16") << "v019_z2_bf16_dp2"
                          << "v0.13+ loads it with engine.load_checkpoint(dir, "
                             "load_optimizer_states=False)";
  }
  void dropOptimizer() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, name);
    QFETCH(QString, advice);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto out = dir.file("weights");
    const auto r = realds::repair(e.save_dir, out, {"--drop-optimizer"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find(advice.toStdString()) != std::string::npos, r.out.c_str());
    QCOMPARE(realds::load(out, e.name).exit_code, 1);  // the defaults need the optimizer files
    const auto lp = realds::reference(e.name, "lp");
    std::vector<std::string> args{"--load-optimizer-states", "0", "--strict", "--expect-fp32", lp};
    REALDS_EXPECT_STRICT(realds::load(out, e.name, args));
    if (e.dtype == "fp16") {
      args.push_back("--load-module-only");
      REALDS_EXPECT_STRICT(realds::load(out, e.name, args));
    }
  }

  // ZeRO-3 at dp 2 -> 3: 0.19 consolidates the same masters and moments.
  void repartitionZero3() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_z3_fp16_dp2");
    test::TempDir dir;
    const auto out = dir.file("dp3");
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, {"--repartition", "--world-size", "3"}), 0);
    const auto c = realds::load(out, e.name,
                                {"--strict", "--expect-fp32", realds::reference(e.name, "fp32"),
                                 "--expect-moments", realds::reference(e.name, "moments")},
                                3);
    REALDS_EXPECT_STRICT(c);
  }

  // Model B = model A + one Linear: A's trained 0.19 checkpoint grafted onto a fresh 0.19 B. 0.19 loads it as
  // B with A's masters for A's params and B's initial ones for the new layer, and trains a step.
  void graftAddedLayer() {
    REALDS_REQUIRE_DS("0.19");
    const auto a = realds::checkpoint("v019_z2_fp16_dp2");
    const auto b = realds::checkpoint("v019_z2_fp16_dp2_modelB_fresh");
    test::TempDir dir;
    const auto out = dir.file("grafted"), expect = dir.file("expect_fp32.pt");
    const auto r = test::run_cli({"repair", a.save_dir, "-o", out, "--repartition", "--target", b.save_dir,
                                  "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(realds::parse(r.out)["ok"].toBool());
    const auto merged = realds::python_with_deepspeed(
        {"-c",
         "import sys, torch\n"
         "a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])\n"
         "assert set(a) < set(b), (sorted(a), sorted(b))\n"
         "torch.save({k: (a[k] if k in a else v) for k, v in b.items()}, sys.argv[3])\n",
         realds::reference(a.name, "fp32"), realds::reference(b.name, "fp32"), expect},
        "0.19");
    QVERIFY2(merged.exit_code == 0, realds::describe(merged).c_str());
    REALDS_EXPECT_STRICT(realds::load(out, b.name, {"--strict", "--expect-fp32", expect}));
  }
};

QTEST_GUILESS_MAIN(TestRealdsRepairV019)
#include "test_realds_repair_v019.moc"
