// The real checkpoints committed under tests/fixtures/deepspeed are what DeepSpeed writes: the harness
// rewrites each one bit for bit (ZeRO-3: but the padding of its fp32 partitions, which DeepSpeed leaves
// uninitialised; there DeepSpeed itself must load the committed files with the masters and moments it
// consolidates from the rewritten ones), and DeepSpeed's zero_to_fp32.py gives the committed consolidated
// weights.
#include <QtTest>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

class TestRealdsFixtures : public QObject {
  Q_OBJECT

 private slots:
  void committedFixturesAreWhatDeepSpeedWrites_data() {
    QTest::addColumn<QString>("name");
    for (const char* n :
         {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2", "bf16opt_zero1_ws2"})
      QTest::newRow(n) << QString(n);
  }
  void committedFixturesAreWhatDeepSpeedWrites() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    const auto e = realds::checkpoint(n);
    const std::string committed = test::deepspeed_fixture(n) + "/checkpoint/" + e.tag;
    const auto written = test::files_in(e.tag_dir());
    QCOMPARE(test::files_in(committed), written);
    int differing = 0;
    for (const auto& f : written) {
      if (test::read_text(committed + "/" + f) == test::read_text(e.tag_dir() + "/" + f)) continue;
      QVERIFY2(e.stage == 3 && f.find("optim_states") != std::string::npos,
               (n + "/" + f + " differs").c_str());
      ++differing;
    }
    if (differing > 0) {
      const auto c = realds::load(test::deepspeed_fixture(n) + "/checkpoint", n,
                                  {"--strict", "--expect-fp32", realds::reference(n, "fp32"),
                                   "--expect-moments", realds::reference(n, "moments")});
      REALDS_EXPECT_STRICT(c);
    }
    const std::string bin = test::deepspeed_fixture(n) + "/checkpoint.zero_to_fp32.bin";
    if (!fs::exists(bin)) {
      QCOMPARE(n,
               std::string("bf16opt_zero1_ws2"));  // v0.12.6's zero_to_fp32.py rejects BF16_Optimizer files
      return;
    }
    CKPTDOC_EXPECT_EXIT(test::run_python(test::script("fixtures/compare_state_dicts.py"),
                                         {bin, realds::reference(n, "zero_to_fp32")}),
                        0);
  }
};

CKPTDOC_TEST_MAIN(TestRealdsFixtures)
#include "test_realds_fixtures.moc"
