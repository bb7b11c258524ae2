// DeepSpeed 0.17.6-0.18.4 save no optimizer state with bf16 at ZeRO stage 0 (DeepSpeed #7571), written here
// by the real DeepSpeed 0.18.4 (scripts/judges-extra-deepspeed.txt). ckptdoc's finding says what a resume in
// those versions does and what to do instead; the same 0.18.4 checks both claims
// (tests/realds/resume_masters_check.py): a plain resume keeps the new engine's masters and the first step
// moves the weights by that gap, while load_module_only=True starts from masters equal to the saved weights.
#include <QJsonArray>
#include <QJsonObject>
#include <QRegularExpression>
#include <QtTest>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

// The largest |master - bf16 weight| right after 0.18.4's load_checkpoint, and the largest weight change of
// the first step, from rank 0's line of resume_masters_check.py.
std::pair<double, double> resume(const std::string& save_dir, bool module_only, const test::TempDir& dir) {
  const std::string logs = dir.file(module_only ? "module-only" : "plain");
  std::vector<std::string> args{test::source_dir() + "/tests/realds/resume_masters_check.py", save_dir};
  if (module_only) args.push_back("--module-only");
  const auto r = realds::launch(args, 2, "0.18.4", logs);
  if (r.exit_code != 0) throw std::runtime_error("resume_masters_check.py failed:\n" + realds::describe(r));
  const QString line = QString::fromStdString(test::read_text(logs + "/rank0.log"));
  const auto m =
      QRegularExpression(R"(after load ([0-9.e+-]+);.*max\|weight change\| ([0-9.e+-]+))").match(line);
  if (!m.hasMatch()) throw std::runtime_error("no result line in " + logs + "/rank0.log");
  return {m.captured(1).toDouble(), m.captured(2).toDouble()};
}

}  // namespace

class TestRealdsV0184NoOptimizer : public QObject {
  Q_OBJECT

 private slots:
  void findingAndItsAdviceHoldIn0184() {
    REALDS_REQUIRE_DS("0.18.4");
    const auto e = realds::checkpoint("v0184_bf16_z0_dp2");
    const auto r = test::run_cli({"diagnose", e.save_dir, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto report = realds::parse(r.out);
    QString message;
    for (const auto& f : report["findings"].toArray())
      if (f.toObject()["code"].toString() == "optimizer-state-not-saved")
        message = f.toObject()["message"].toString();
    QVERIFY2(message.contains("DeepSpeed 0.18.4 saves none") && message.contains("#7571") &&
                 message.contains("load_module_only=True"),
             qPrintable(message));
    // The verdict rests on what was read: no master was compared.
    QCOMPARE(report["verdict"].toObject()["masters_compared"].toInt(), 0);
    QVERIFY(report["verdict"].toObject()["headline"].toString() != "No problems found.");

    test::TempDir dir;
    const auto [plain_gap, plain_moved] = resume(e.save_dir, false, dir);
    QVERIFY2(plain_gap > 0.05,
             qPrintable(QString::number(plain_gap)));  // the new engine's masters, not the weights
    QVERIFY2(plain_moved > 0.5 * plain_gap, qPrintable(QString::number(plain_moved)));  // written over them
    const auto [module_gap, module_moved] = resume(e.save_dir, true, dir);
    QCOMPARE(module_gap, 0.0);  // the advice: masters refreshed from the saved weights
    QVERIFY2(module_moved < 0.01, qPrintable(QString::number(module_moved)));  // one ordinary step
  }
};

QTEST_GUILESS_MAIN(TestRealdsV0184NoOptimizer)
#include "test_realds_v0184_no_optimizer.moc"
