// The seed scenario end to end, as the #762 user lives it, with real DeepSpeed v0.12.6 at every step: train
// -> a fresh engine loads the checkpoint without optimizer states and saves (the masters stay at their random
// init) -> `ckptdoc diagnose` names fp32-master-mismatch and nothing else -> `repair --refresh-fp32` exits 0
// -> DeepSpeed loads the repair with optimizer states, holds the loaded weights as masters, and one more
// training step moves no weight by more than 0.01. The unrepaired checkpoint, loaded the same way, moves them
// by ~0.2: the check that passes the repair fails the bug.
#include <QJsonDocument>
#include <QtTest>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

class TestRealdsSeed : public QObject {
  Q_OBJECT

 private slots:
  void seedScenario_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("zero2 fp16") << "seed_z2_fp16_no_optim";
    QTest::newRow("zero2 bf16") << "seed_z2_bf16_no_optim";
    QTest::newRow("BF16_Optimizer") << "seed_bf16opt_no_optim";
  }
  void seedScenario() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    const auto lp = realds::reference(e.name, "lp");

    // The bug is real: DeepSpeed resumes from the #762 checkpoint and its first step wrecks the weights.
    const auto broken = realds::load(e.save_dir, e.name, {"--strict"});
    QCOMPARE(broken.exit_code, 1);
    QVERIFY(broken.verdict()["step_ok"].toBool());
    QVERIFY2(broken.report["after_step"].toObject()["lp_delta_max_abs"].toDouble() > 0.05,
             broken.describe().c_str());

    // ckptdoc names it, and only it.
    auto d = test::run_cli({"diagnose", e.save_dir, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(d, 1);
    QStringList errors;
    for (const auto& f :
         QJsonDocument::fromJson(QByteArray::fromStdString(d.out)).object()["findings"].toArray())
      if (f.toObject()["severity"].toString() == "error") errors << f.toObject()["code"].toString();
    QCOMPARE(errors, QStringList{"fp32-master-mismatch"});

    // One click: refresh the masters; the repair verifies clean.
    test::TempDir dir;
    const auto fixed = dir.file("fixed");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", fixed, "--refresh-fp32", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("Repair verified") != std::string::npos);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", fixed, "--device", "cpu"}), 0);

    // Real DeepSpeed loads it with optimizer states; masters are the loaded weights; the next step is small.
    const auto c = realds::load(fixed, e.name, {"--strict", "--expect-fp32", lp});
    REALDS_EXPECT_STRICT(c);
    QVERIFY(c.report["after_step"].toObject()["lp_delta_max_abs"].toDouble() <= 0.01);
  }
};

CKPTDOC_TEST_MAIN(TestRealdsSeed)
#include "test_realds_seed.moc"
