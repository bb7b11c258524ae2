// The repair CLI as a user runs it, checked with real torch: every written file loads (DeepSpeed's classes
// stand in via tests/fixtures/ds_stand_ins.py), keys and unchanged tensors are identical to the input, and
// changed tensors hold the expected values. Whether real DeepSpeed loads the outputs of real checkpoints is
// tests/realds' job; ds_check.py's re-implementation of its load preconditions ("loader") is kept only for
// checkpoints the harness cannot build a model for (the demo, synthesized layouts).
#include <QtTest>
#include <filesystem>

#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

const char* kFixtures[] = {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2",
                           "bf16opt_zero1_ws2"};

test::RunResult check(const std::vector<std::string>& args) {
  return test::run_python(test::script("fixtures/ds_check.py"), args);
}

std::string copy_fixture(const test::TempDir& dir, const std::string& name) {
  const std::string to = dir.file(name);
  test::copy_tree(test::deepspeed_fixture(name) + "/checkpoint", to);
  return to;
}

}  // namespace

class TestRepairInterop : public QObject {
  Q_OBJECT

 private slots:
  void demoLoadsInTorchAndIsStale() {
    test::TempDir dir;
    const auto out = dir.file("demo");
    auto r = test::run_cli({"demo", out});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("ckptdoc diagnose") != std::string::npos);
    CKPTDOC_EXPECT_EXIT(check({"load", out, "+", "loader", out, "+", "stale", out}), 0);
    // A second run refuses to overwrite, --force replaces.
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", out}), 2);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", out, "--force", "--healthy"}), 0);
    CKPTDOC_EXPECT_EXIT(check({"stale", out}), 1);
  }

  void demoRepairRoundTrip() {
    test::TempDir dir;
    const auto in = dir.file("demo"), out = dir.file("fixed");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", in}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", in}), 1);
    auto r = test::run_cli({"repair", in, "-o", out, "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("Repair verified") != std::string::npos);
    CKPTDOC_EXPECT_EXIT(check({"compare", in, out, "refresh"}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", out}), 0);
  }

  void refreshOnFixtures() {
    for (const char* name : {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "bf16opt_zero1_ws2"}) {
      test::TempDir dir;
      const auto in = copy_fixture(dir, name), out = dir.file("out");
      CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out, "--refresh-fp32", "--device", "cpu"}), 0);
      CKPTDOC_EXPECT_EXIT(check({"compare", in, out, "refresh"}), 0);
    }
  }

  void refreshZero3FromLpSource() {
    test::TempDir dir;
    const auto in = copy_fixture(dir, "zero3_fp16_ws2"), out = dir.file("out");
    const auto src = test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint.zero_to_fp32.bin";
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out, "--refresh-fp32"}), 2);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out, "--refresh-fp32", "--lp-source", src}), 0);
    CKPTDOC_EXPECT_EXIT(check({"compare", in, out, "refresh", "+", "consolidated", in, out}), 0);
  }

  void resetOnFixtures() {
    for (const char* name : kFixtures) {
      test::TempDir dir;
      const auto in = copy_fixture(dir, name), out = dir.file("out");
      CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out, "--reset-optimizer"}), 0);
      CKPTDOC_EXPECT_EXIT(check({"compare", in, out, "reset"}), 0);
    }
  }

  void dropOnFixtures() {
    for (const char* name : {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "bf16opt_zero1_ws2"}) {
      test::TempDir dir;
      const auto in = copy_fixture(dir, name), out = dir.file("out");
      auto r = test::run_cli({"repair", in, "-o", out, "--drop-optimizer"});
      CKPTDOC_EXPECT_EXIT(r, 0);
      QVERIFY(r.out.find("load_optimizer_states=False") != std::string::npos);
      CKPTDOC_EXPECT_EXIT(check({"compare", in, out, "drop"}), 0);
    }
  }

  // 2 -> 3 -> 2: every step loads in torch and keeps each param's fp32 and moments bit for bit;
  // ZeRO-1/2 round trips reproduce the optimizer files' tensors exactly (ZeRO-3 padding is zeroed).
  void repartitionRoundTrip_data() {
    QTest::addColumn<QString>("fixture");
    for (const char* name : kFixtures) QTest::newRow(name) << QString(name);
  }
  void repartitionRoundTrip() {
    QFETCH(QString, fixture);
    const std::string name = fixture.toStdString();
    test::TempDir dir;
    const auto in = copy_fixture(dir, name), mid = dir.file("dp3"), back = dir.file("dp2");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", mid, "--repartition", "--world-size", "3"}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", mid, "-o", back, "--repartition", "--world-size", "2"}), 0);
    std::vector<std::string> args{"load", mid, "+", "consolidated", in, mid, "+", "consolidated", in, back};
    if (name != "zero3_fp16_ws2") args.insert(args.end(), {"+", "compare", in, back, "same"});
    CKPTDOC_EXPECT_EXIT(check(args), 0);
  }

  void synthesizedStagesThroughTheCli_data() {
    QTest::addColumn<QString>("stage");
    QTest::addColumn<QString>("dtype");
    QTest::newRow("zero1-fp16") << "1"
                                << "fp16";
    QTest::newRow("zero2-bf16") << "2"
                                << "bf16";
    QTest::newRow("zero3-fp16") << "3"
                                << "fp16";
    QTest::newRow("zero3-bf16") << "3"
                                << "bf16";
  }
  void synthesizedStagesThroughTheCli() {
    QFETCH(QString, stage);
    QFETCH(QString, dtype);
    test::TempDir dir;
    const auto in = dir.file("in"), out = dir.file("out");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", in, "--stage", stage.toStdString(), "--dtype",
                                       dtype.toStdString(), "--dp", "3", "--layers", "1", "--hidden", "12"}),
                        0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out, "--repartition", "--world-size", "4"}), 0);
    CKPTDOC_EXPECT_EXIT(check({"load", in, "+", "loader", in, "+", "load", out, "+", "loader", out, "+",
                               "consolidated", in, out}),
                        0);
  }

  void cliUsageAndDryRun() {
    test::TempDir dir;
    const auto in = copy_fixture(dir, "zero2_fp16_ws2"), out = dir.file("out");
    auto r = test::run_cli({"repair", in, "-o", out, "--refresh-fp32", "--dry-run"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("Repair plan") != std::string::npos);
    QVERIFY(!fs::exists(out));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out}), 2);  // no action
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", in + "/x", "--reset-optimizer"}),
                        2);  // inside input
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", dir.file("nothing"), "-o", out, "--reset-optimizer"}), 2);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out, "--repartition"}), 2);
    r = test::run_cli({"repair", in, "-o", out, "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("\"ok\": true") != std::string::npos);
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestRepairInterop)
#include "test_repair_interop.moc"
