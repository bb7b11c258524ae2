// Every repair action on the real checkpoints it applies to, accepted only when real DeepSpeed v0.12.6 loads
// the output with optimizer states (engine.load_checkpoint), trains one step with a finite loss, keeps fp32
// and lp within rounding, moves no lp weight by more than 0.01, and holds exactly the values the action
// promised (consolidated by DeepSpeed itself, compared with references DeepSpeed or torch produced from the
// input).
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <map>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

// A small torch step of the test itself (plain tensors only, no DeepSpeed class involved).
void torch_py(const std::string& code, const std::vector<std::string>& args) {
  std::vector<std::string> all{"-c", code};
  all.insert(all.end(), args.begin(), args.end());
  const auto r = test::run(test::python(), all);
  if (r.exit_code != 0) throw std::runtime_error("python failed: " + r.err);
}

QJsonObject json_of(const std::string& text) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(text)).object();
}

}  // namespace

class TestRealdsRepair : public QObject {
  Q_OBJECT

 private slots:
  // fp32 masters := float(lp): DeepSpeed then holds exactly the module's weights as masters and the input's
  // moments, and trains on from them.
  void refreshFp32_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"seed_z1_fp16_no_optim_step", "z2_fp16_dp3_edge", "bf16opt_s0_dp3",
                          "z1_fp16_dp4_edge", "seed_z2_bf16_module_only_no_optim"})
      QTest::newRow(n) << QString(n);
  }
  void refreshFp32() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto out = dir.file("fixed");
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, {"--refresh-fp32"}), 0);
    const auto c = realds::load(out, e.name,
                                {"--strict", "--expect-fp32", realds::reference(e.name, "lp"),
                                 "--expect-moments", realds::reference(e.name, "moments")});
    REALDS_EXPECT_STRICT(c);
    QVERIFY(c.verdict()["expect_fp32_match"].toBool());
    QVERIFY(c.verdict()["expect_moments_match"].toBool());
  }

  // ZeRO-3 keeps no weights in its model files: the lp weights come from a consolidated file (--lp-source),
  // here zero_to_fp32.py's output rounded to fp16 by torch, so every master really changes.
  void refreshFp32Zero3FromLpSource() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z3_fp16_dp4_subgroups");
    test::TempDir dir;
    const auto lp = dir.file("lp.pt"), out = dir.file("fixed");
    torch_py(
        "import sys, torch\n"
        "sd = torch.load(sys.argv[1])\n"
        "torch.save({k: v.half() for k, v in sd.items()}, sys.argv[2])\n",
        {realds::reference(e.name, "zero_to_fp32"), lp});
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, {"--refresh-fp32", "--lp-source", lp}), 0);
    const auto c = realds::load(
        out, e.name,
        {"--strict", "--expect-fp32", lp, "--expect-moments", realds::reference(e.name, "moments")});
    REALDS_EXPECT_STRICT(c);
  }

  // Empty Adam state: DeepSpeed loads the masters unchanged and starts the moments anew at the next step.
  void resetOptimizer_data() {
    QTest::addColumn<QString>("name");
    for (const char* n :
         {"z1_fp16_dp2", "z2_bf16_dp4", "z3_fp16_dp4_subgroups", "bf16opt_s1_dp2", "bf16opt_s0_dp3"})
      QTest::newRow(n) << QString(n);
  }
  void resetOptimizer() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto out = dir.file("reset");
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, {"--reset-optimizer"}), 0);
    const auto c =
        realds::load(out, e.name, {"--strict", "--expect-fp32", realds::reference(e.name, "fp32")});
    REALDS_EXPECT_STRICT(c);
    const auto summary = c.report["after_load_summary"].toObject();
    QVERIFY2(!summary["adam_state_present"].toBool(), "the reset optimizer state came back with moments");
    // The step after the reset is Adam's first: every group at step 1.
    for (const auto& r : c.report["after_step"].toObject()["per_rank_groups"].toArray())
      for (const auto& g : r.toObject()["groups"].toArray())
        QCOMPARE(g.toObject()["adam"].toObject()["step"].toDouble(), 1.0);
  }

  // Weights only: what each load option of DeepSpeed v0.12.6 really does with a folder without optimizer
  // files (the README's loading table says the same). fp16: load_module_only=True with
  // load_optimizer_states=False refreshes the masters; bf16 (ZeRO and BF16_Optimizer): no option does, the
  // masters stay stale (#762).
  void dropOptimizerLoadOptions_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("module_only_refreshes");
    QTest::newRow("zero2 fp16") << "z2_fp16_dp2" << true;
    QTest::newRow("zero2 bf16") << "z2_bf16_dp2" << false;
    QTest::newRow("BF16_Optimizer") << "bf16opt_s1_dp2" << false;
  }
  void dropOptimizerLoadOptions() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(bool, module_only_refreshes);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto out = dir.file("weights");
    const auto r = realds::repair(e.save_dir, out, {"--drop-optimizer"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    // The CLI tells the user the load that works for this dtype, or that none does.
    QVERIFY2(r.out.find(module_only_refreshes ? "load_module_only=True, load_optimizer_states=False"
                                              : "--refresh-fp32 --reset-optimizer") != std::string::npos,
             r.out.c_str());
    const auto plain = realds::load(out, e.name);  // defaults: optimizer files are required
    QCOMPARE(plain.exit_code, 1);
    QVERIFY(plain.report["load"].toObject()["first_exception"].toObject().contains("exception_text"));
    const auto no_optim = realds::load(out, e.name, {"--load-optimizer-states", "0"});
    QCOMPARE(no_optim.exit_code, 0);
    QVERIFY2(!no_optim.verdict()["fp32_lp_consistent"].toBool(), "v0.12.6 refreshed the masters after all");
    const auto module_only = realds::load(out, e.name,
                                          {"--load-optimizer-states", "0", "--load-module-only", "--strict",
                                           "--expect-fp32", realds::reference(e.name, "lp")});
    QCOMPARE(module_only.strict_ok(), module_only_refreshes);
    // What the CLI recommends for bf16 instead: refreshed masters with an empty optimizer state, loaded with
    // defaults.
    if (!module_only_refreshes) {
      const auto warm = dir.file("warm");
      CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, warm, {"--refresh-fp32", "--reset-optimizer"}), 0);
      const auto c =
          realds::load(warm, e.name, {"--strict", "--expect-fp32", realds::reference(e.name, "lp")});
      REALDS_EXPECT_STRICT(c);
    }
  }

  // dp 2 -> 3 -> 1 -> 4: DeepSpeed loads every size with the same consolidated masters and moments.
  void repartitionChain_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("zero1 fp16") << "z1_fp16_dp2";
    QTest::newRow("zero2 bf16") << "z2_bf16_dp2";
    QTest::newRow("zero2 fp16 edge") << "z2_fp16_dp3_edge";
  }
  void repartitionChain() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    const std::vector<std::string> expect{"--strict", "--expect-fp32", realds::reference(e.name, "fp32"),
                                          "--expect-moments", realds::reference(e.name, "moments")};
    test::TempDir dir;
    std::string from = e.save_dir;
    for (int n : {3, 1, 4}) {
      const auto out = dir.file("dp" + std::to_string(n));
      CKPTDOC_EXPECT_EXIT(realds::repair(from, out, {"--repartition", "--world-size", std::to_string(n)}), 0);
      const auto c = realds::load(out, e.name, expect, n);
      QVERIFY2(c.strict_ok(), ("dp " + std::to_string(n) + ": " + c.describe()).c_str());
      from = out;
    }
  }

  // ZeRO-3 (with sub-groups that split a param group) and BF16_Optimizer change world size too.
  void repartitionZero3AndBf16Optimizer_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("world");
    QTest::newRow("zero3 sub-groups 4 -> 2") << "z3_fp16_dp4_subgroups" << 2;
    QTest::newRow("zero3 bf16 3 -> 4") << "z3_bf16_dp3_fresh" << 4;
    QTest::newRow("BF16_Optimizer 2 -> 3") << "bf16opt_s1_dp2" << 3;
  }
  void repartitionZero3AndBf16Optimizer() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(int, world);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto out = dir.file("out");
    CKPTDOC_EXPECT_EXIT(
        realds::repair(e.save_dir, out, {"--repartition", "--world-size", std::to_string(world)}), 0);
    const auto c = realds::load(out, e.name,
                                {"--strict", "--expect-fp32", realds::reference(e.name, "fp32"),
                                 "--expect-moments", realds::reference(e.name, "moments")},
                                world);
    REALDS_EXPECT_STRICT(c);
  }

  // Model B = model A + one Linear inside the param order. The graft carries A's masters, weights and moments
  // onto B's layout (a fresh B checkpoint as template); the new layer keeps B's initial values with zero
  // moments, which the verification names as a warning (exit 0), and DeepSpeed loads it as model B.
  void graftAddedLayer() {
    REALDS_REQUIRE();
    const auto a = realds::checkpoint("z2_fp16_dp2");
    const auto b = realds::checkpoint("z2_fp16_dp2_modelB_fresh");
    test::TempDir dir;
    const auto out = dir.file("grafted"), expect = dir.file("expect_fp32.pt");
    const auto r = test::run_cli({"repair", a.save_dir, "-o", out, "--repartition", "--target", b.save_dir,
                                  "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto j = json_of(r.out);
    QVERIFY(j["ok"].toBool());
    QStringList warnings;
    for (const auto& f : j["verification"].toObject()["findings"].toArray())
      if (f.toObject()["severity"].toString() == "warning") warnings << f.toObject()["code"].toString();
    QCOMPARE(warnings, QStringList{"new-params-zero-moments"});
    // A's masters for every param A has; B's initial masters for the new layer.
    torch_py(
        "import sys, torch\n"
        "a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])\n"
        "torch.save({k: (a[k] if k in a else v) for k, v in b.items()}, sys.argv[3])\n",
        {realds::reference(a.name, "fp32"), realds::reference(b.name, "fp32"), expect});
    const auto c = realds::load(out, b.name, {"--strict", "--expect-fp32", expect});
    REALDS_EXPECT_STRICT(c);
  }

  // Model B (A + one Linear) loaded A's checkpoint with load_module_strict=False and saved: DeepSpeed loads
  // it, but its next step fails (A's moments against B's partitions). Diagnose named it in 8 near-identical
  // shape errors and offered --refresh-fp32, which every action refused by repeating them. Now: one finding
  // with the cause, and only fixes the planner runs; the offered one gives DeepSpeed B's weights as masters
  // and a step.
  void momentsOfASmallerModelGetOneFindingAndAFixThatRuns() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("addlayer_z2_fp16_strict_false");
    const auto before = realds::load(e.save_dir, e.name, {"--strict"});
    QVERIFY2(!before.verdict()["step_ok"].toBool(), "DeepSpeed trained on from the input: nothing to fix");

    const auto d = test::run_cli({"diagnose", e.save_dir, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(d, 1);
    std::map<QString, QJsonObject> by_code;
    int errors = 0;
    for (const auto& v : json_of(d.out)["findings"].toArray()) {
      const auto f = v.toObject();
      errors += f["severity"].toString() == "error";
      by_code[f["code"].toString()] = f;
    }
    QCOMPARE(errors, 2);
    QVERIFY(!by_code.count("shape-mismatch"));
    const auto moments = by_code["optimizer-state-shape-mismatch"];
    QVERIFY2(moments["message"].toString().contains("load_module_strict=False"), qPrintable(d.out.c_str()));
    QCOMPARE(moments["ranks"].toArray(), (QJsonArray{0, 1}));
    QCOMPARE(moments["repair"].toString(), QString("reset-optimizer"));
    // The masters' refresh runs only with the reset: its Fix runs both (the flags say so; the apps tick
    // both).
    const auto masters = by_code["fp32-master-mismatch"];
    QCOMPARE(masters["repair"].toString(), QString("refresh-fp32"));
    const QString flags = masters["details"].toObject()["fix"].toString();
    QCOMPARE(flags, QString("--refresh-fp32 --reset-optimizer"));

    // The refresh alone is still refused, in one line about the moments.
    test::TempDir dir;
    const auto exp = test::run_cli({"export", e.save_dir, "-o", dir.file("w.safetensors")});
    CKPTDOC_EXPECT_EXIT(exp, 2);  // stale masters: the repair it names is one that runs
    QVERIFY2(exp.err.find("-o OUT --refresh-fp32 --reset-optimizer)") != std::string::npos, exp.err.c_str());
    const auto alone = realds::repair(e.save_dir, dir.file("alone"), {"--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(alone, 2);
    QVERIFY2(alone.err.find("optimizer-state-shape-mismatch") != std::string::npos, alone.err.c_str());
    QVERIFY(!fs::exists(dir.file("alone")));

    const auto out = dir.file("fixed");
    std::vector<std::string> args;
    for (const auto& f : flags.split(' ')) args.push_back(f.toStdString());
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, args), 0);
    const auto c = realds::load(out, e.name, {"--strict", "--expect-fp32", realds::reference(e.name, "lp")});
    REALDS_EXPECT_STRICT(c);
    QVERIFY(c.verdict()["expect_fp32_match"].toBool());
    QVERIFY2(!c.report["after_load_summary"].toObject()["adam_state_present"].toBool(), "moments came back");
  }
};

CKPTDOC_TEST_MAIN(TestRealdsRepair)
#include "test_realds_repair.moc"
