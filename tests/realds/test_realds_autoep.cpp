// DeepSpeed 0.19's AutoEP under ZeRO-3 (matrix entry v019_autoep_z3, tests/realds/autoep_train.py): each rank
// keeps 2 of 4 experts under the same param names (ds_autoep_layers) and ZeRO-3 partitions that sub-group
// over the expert-data-parallel group alone (ds_zero_partition_groups: 1 rank there, 2 for the dense
// sub-groups). 0.19 loads it and its zero_to_fp32.py refuses it. ckptdoc must not lay it out with one dp:
// before, inspect printed a dp-2 layout of the experts, diagnose blamed a larger model's moments and missing
// expert files, and export wrote half-and-half experts with exit 0. Now every command refuses it with one
// finding naming both keys. Derived (a real 0.19 ZeRO-3 job's files with the key added by
// partition_groups_edit.py): counts equal to dp read as before, one sub-group's count below dp refused.
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

}  // namespace

class TestRealdsAutoep : public QObject {
  Q_OBJECT

 private slots:
  void realAutoepZero3IsRefusedNotMisread() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_autoep_z3");
    // What 0.19 itself does with it (autoep_train.py): a fresh engine loads it, zero_to_fp32.py refuses it.
    const auto run =
        realds::parse(test::read_text(fs::path(e.save_dir).parent_path().string() + "/ref/run.json"));
    QVERIFY2(run["loaded"].toBool(), "0.19's load_checkpoint did not load its own AutoEP save");
    QVERIFY(run["zero_to_fp32_rc"].toInt() != 0);
    QVERIFY2(run["zero_to_fp32_error"].toString().contains("AutoEP"),
             qPrintable(run["zero_to_fp32_error"].toString()));

    const auto report = realds::diagnose_json(e.save_dir, 1);
    const auto f = realds::finding(report, "layout-unsupported");
    const QString msg = f["message"].toString();
    QCOMPARE(f["severity"].toString(), QString("error"));
    QVERIFY2(msg.contains("ds_zero_partition_groups") && msg.contains("sub-group 2 over 1 rank") &&
                 msg.contains("dp 2") && msg.contains("ds_autoep_layers") && msg.contains("2 of 4 experts"),
             qPrintable(msg));
    // The one error: no expert files invented, no partition read with the wrong dp, no moments blamed.
    QCOMPARE(realds::codes(report, "error"), std::vector<std::string>{"layout-unsupported"});
    QVERIFY(report["verdict"].toObject()["headline"].toString() != "No problems found.");
    QCOMPARE(report["verdict"].toObject()["masters_compared"].toInt(), 0);

    const auto inspect = realds::parse(test::run_cli({"inspect", e.save_dir, "--json"}).out);
    QVERIFY2(inspect["groups"].toArray().isEmpty(),
             qPrintable(QJsonDocument(inspect["groups"].toArray()).toJson()));

    test::TempDir dir;
    const std::string out = dir.file("autoep.safetensors");
    const auto ex = test::run_cli({"export", e.save_dir, "-o", out});
    CKPTDOC_EXPECT_EXIT(ex, 2);
    QVERIFY2(ex.err.find("ds_zero_partition_groups") != std::string::npos, ex.err.c_str());
    QVERIFY(!fs::exists(out));
  }

  // Derived from a real 0.19 ZeRO-3 job: the key alone changes nothing; a sub-group partitioned over fewer
  // ranks than dp is refused, never laid out with dp.
  void partitionCountsDecide() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_z3_fp16_dp2");
    test::TempDir dir;
    const auto same = realds::diagnose_json(with_partition_groups(e, dir, "2"), 0);
    QVERIFY2(realds::codes(same, "error").empty() && realds::codes(same, "warning").empty(),
             qPrintable(QJsonDocument(same["findings"].toArray()).toJson()));
    QVERIFY(!realds::has_code(same, "error", "layout-unsupported"));

    const auto fewer = realds::diagnose_json(with_partition_groups(e, dir, "2,1"), 1);
    QCOMPARE(realds::codes(fewer, "error"), std::vector<std::string>{"layout-unsupported"});
    QVERIFY(realds::finding(fewer, "layout-unsupported")["message"].toString().contains(
        "sub-group 1 over 1 rank"));
  }
};

QTEST_GUILESS_MAIN(TestRealdsAutoep)
#include "test_realds_autoep.moc"
