// DeepSpeed v0.14.5, where #762 is fixed (v0.13+ refreshes the fp32 masters on a load without optimizer
// states) and what most users run: its checkpoints diagnose clean, and ckptdoc's refresh, re-partition and
// reset outputs load in v0.14.5 itself with the promised values. Export against its zero_to_fp32.py is in
// test_realds_export.
#include <QJsonDocument>
#include <QtTest>
#include <set>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

class TestRealdsV145 : public QObject {
  Q_OBJECT

 private slots:
  // The seed scenario on v0.14.5: the load refreshed the masters and kept no optimizer state; nothing to fix.
  void seedScenarioIsClean() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("v145_seed_z2_fp16_no_optim");
    const auto r = test::run_cli({"diagnose", e.save_dir, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto report = QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
    QVERIFY(realds::codes(report, "error").empty());
    QVERIFY(realds::codes(report, "warning").empty());
    // beside it, the alignment padding counted as not analysed (info: nothing to compare there)
    const auto info = realds::codes(report, "info");
    QCOMPARE(std::set<std::string>(info.begin(), info.end()),
             (std::set<std::string>{"optimizer-state-empty", "not-analysed"}));
  }

  // Stale masters on one rank of a v0.14.5 bf16 checkpoint (damaged with torch): found, refreshed, and
  // v0.14.5 loads the repair holding its weights as masters.
  void refreshLoads() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("v145_z2_bf16_dp3");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    CKPTDOC_EXPECT_EXIT(realds::python_with_deepspeed(
                            {test::source_dir() + "/tests/realds/damage.py", in, "stale-fp32", "2"}, e.ds),
                        0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", in, "--device", "cpu"}), 1);
    const auto out = dir.file("fixed");
    CKPTDOC_EXPECT_EXIT(realds::repair(in, out, {"--refresh-fp32"}), 0);
    const auto c = realds::load(out, e.name,
                                {"--strict", "--expect-fp32", realds::reference(e.name, "lp"),
                                 "--expect-moments", realds::reference(e.name, "moments")});
    REALDS_EXPECT_STRICT(c);
  }

  void repartitionLoads() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("v145_z2_fp16_dp2");
    test::TempDir dir;
    const auto out = dir.file("dp3");
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, {"--repartition", "--world-size", "3"}), 0);
    const auto c = realds::load(out, e.name,
                                {"--strict", "--expect-fp32", realds::reference(e.name, "fp32"),
                                 "--expect-moments", realds::reference(e.name, "moments")},
                                3);
    REALDS_EXPECT_STRICT(c);
  }

  void resetLoads() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("v145_z2_bf16_dp3");
    test::TempDir dir;
    const auto out = dir.file("reset");
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, {"--reset-optimizer"}), 0);
    const auto c =
        realds::load(out, e.name, {"--strict", "--expect-fp32", realds::reference(e.name, "fp32")});
    REALDS_EXPECT_STRICT(c);
    QVERIFY(!c.report["after_load_summary"].toObject()["adam_state_present"].toBool());
  }

  // A checkpoint v0.12.6 wrote and ckptdoc repaired loads in v0.14.5 too (users upgrade between save and
  // load).
  void v0126RepairLoadsInV145() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("seed_z2_fp16_no_optim");
    test::TempDir dir;
    const auto out = dir.file("fixed");
    CKPTDOC_EXPECT_EXIT(realds::repair(e.save_dir, out, {"--refresh-fp32"}), 0);
    const auto c = realds::load(out, e.name, {"--strict", "--expect-fp32", realds::reference(e.name, "lp")},
                                0, "0.14.5");
    REALDS_EXPECT_STRICT(c);
    QVERIFY(c.report["versions"].toObject()["deepspeed"].toString().startsWith("0.14.5"));
  }
};

CKPTDOC_TEST_MAIN(TestRealdsV145)
#include "test_realds_v145.moc"
