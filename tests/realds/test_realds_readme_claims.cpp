// Documented claims that had no test, judged by real DeepSpeed: the group_paddings rule per ds_version
// (the "Padding rule" in docs/reference.md) against what DeepSpeed itself saved at the new world size, and
// `repair --repartition --target --allow-shape-change` through the CLI, checked with DeepSpeed's zero_to_fp32
// consolidation and torch.load.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

QJsonObject json_of(const std::string& out) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(out)).object();
}

// group_paddings, partition_count and fp32 lengths of every optimizer file of a tag folder (paddings.py).
QJsonObject paddings(const std::string& tag_dir, const std::string& ds) {
  const auto r =
      realds::python_with_deepspeed({test::source_dir() + "/tests/realds/paddings.py", tag_dir}, ds);
  if (r.exit_code != 0) throw std::runtime_error("paddings.py failed: " + r.err);
  return json_of(r.out.substr(r.out.find('{')));
}

}  // namespace

class TestRealdsReadmeClaims : public QObject {
  Q_OBJECT

 private slots:
  // The padding rule of the checkpoint's own ds_version: a re-partition to dp 3 records what DeepSpeed of
  // that version recorded when it saved the same model at dp 3 (group_paddings, partition_count, fp32
  // lengths).
  void paddingRuleFollowsDsVersion_data() {
    QTest::addColumn<QString>("from");
    QTest::addColumn<QString>("saved_at_dp3");
    QTest::newRow("0.12.6") << "z2_bf16_dp2"
                            << "z1_bf16_dp3_fresh";
    QTest::newRow("0.14.5") << "v145_z2_fp16_dp2"
                            << "v145_z2_bf16_dp3";
  }
  void paddingRuleFollowsDsVersion() {
    REALDS_REQUIRE();
    QFETCH(QString, from);
    QFETCH(QString, saved_at_dp3);
    const auto src = realds::checkpoint(from.toStdString());
    const auto ref = realds::checkpoint(saved_at_dp3.toStdString());
    test::TempDir dir;
    const std::string out = dir.file("dp3");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", src.save_dir, "-o", out, "--repartition", "--world-size",
                                       "3", "--device", "cpu"}),
                        0);
    const auto got = paddings(out + "/" + src.tag, src.ds);
    const auto want = paddings(ref.tag_dir(), ref.ds);
    QCOMPARE(got.size(), 3);
    QVERIFY2(got == want, (QJsonDocument(got).toJson(QJsonDocument::Compact) + " vs " +
                           QJsonDocument(want).toJson(QJsonDocument::Compact))
                              .constData());
  }

  // --allow-shape-change through the CLI: refused without it (naming the params), and with it the changed
  // params keep the template's values while the rest are carried (DeepSpeed's zero_to_fp32 and torch.load
  // judge).
  void allowShapeChange() {
    REALDS_REQUIRE();
    test::TempDir dir;
    const std::string gen = test::script("fixtures/make_deepspeed_checkpoint.py");
    // fc2.weight and fc2.bias change shape; fc1.weight (beside fc2.weight in group 0), fc1.bias and norm
    // carry.
    CKPTDOC_EXPECT_EXIT(test::run_python(gen, {dir.file("in"), "--layers", "9,7,3", "--seed", "1"}), 0);
    CKPTDOC_EXPECT_EXIT(
        test::run_python(gen, {dir.file("tmpl"), "--layers", "9,7,4", "--seed", "2", "--no-moments"}), 0);
    auto r = test::run_cli(
        {"repair", dir.file("in"), "-o", dir.file("out"), "--repartition", "--target", dir.file("tmpl")});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("fc2.weight") != std::string::npos &&
                 r.err.find("--allow-shape-change") != std::string::npos,
             r.err.c_str());
    QVERIFY(!fs::exists(dir.file("out")));
    r = test::run_cli({"repair", dir.file("in"), "-o", dir.file("out"), "--repartition", "--target",
                       dir.file("tmpl"), "--allow-shape-change", "--device", "cpu"});
    QVERIFY2(r.exit_code == 0, (r.out + r.err).c_str());
    const auto c = realds::python_with_deepspeed({test::source_dir() + "/tests/realds/check_graft.py",
                                                  dir.file("out"), dir.file("in"), dir.file("tmpl")});
    CKPTDOC_EXPECT_EXIT(c, 0);
    QVERIFY2(c.out.find("OK 4 carried, 2 from the template") != std::string::npos, c.out.c_str());
  }
};

CKPTDOC_TEST_MAIN(TestRealdsReadmeClaims)
#include "test_realds_readme_claims.moc"
