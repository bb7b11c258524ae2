// `ckptdoc diff` across formats (#28): a DeepSpeed ZeRO-2 checkpoint against a PyTorch Distributed Checkpoint
// of the same model trained the same way by FSDP2 (realds entry crossformat_zero2_fsdp2_ws2:
// cross_format_train.py, each run saved by its own framework). What is right is each framework's own reading:
// reference.json compares DeepSpeed's get_fp32_state_dict_from_zero_checkpoint with torch's dcp_to_torch_save
// weight by weight, and the exp_avg DeepSpeed and FSDP2 held in memory at the save param by param. ckptdoc
// must pair the same names and find, per tensor, the same element count, exact matches and largest
// difference.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <cmath>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kEntry = "crossformat_zero2_fsdp2_ws2";

}  // namespace

class TestRealdsCrossFormat : public QObject {
  Q_OBJECT

 private slots:
  // Both orders; the weights (DeepSpeed's fp32 masters against FSDP2's weights: both fp32 runs) and Adam's
  // exp_avg. The two runs took the same losses, so every tensor is close but not all are equal.
  void diffAgreesWithTheFrameworks_data() {
    QTest::addColumn<QString>("what");
    QTest::addColumn<bool>("deepspeed_first");
    QTest::newRow("weights, DeepSpeed first") << "" << true;
    QTest::newRow("weights, FSDP2 first") << "" << false;
    QTest::newRow("exp_avg") << "exp_avg" << true;
  }
  void diffAgreesWithTheFrameworks() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, what);
    QFETCH(bool, deepspeed_first);
    const auto e = realds::checkpoint(kEntry);
    const auto ref = realds::parse(test::read_text(e.save_dir + "/reference.json"));
    const auto want = ref[what.isEmpty() ? "tensors" : what].toObject();
    QVERIFY(want.size() >= 8);
    QCOMPARE(ref["losses_deepspeed"].toArray(), ref["losses_fsdp2"].toArray());  // the same training

    const std::string ds = e.save_dir + "/deepspeed", fsdp = e.save_dir + "/fsdp2";
    std::vector<std::string> args{"diff", deepspeed_first ? ds : fsdp, deepspeed_first ? fsdp : ds, "--json"};
    if (!what.isEmpty()) args.insert(args.end(), {"--what", what.toStdString()});
    const auto r = test::run_cli(args);
    const auto got = realds::parse(r.out);
    QVERIFY2(!got.isEmpty(), (r.out + r.err).c_str());
    QVERIFY2(got["removed"].toArray().isEmpty() && got["added"].toArray().isEmpty(), r.out.c_str());
    const auto tensors = got["tensors"].toArray();
    QCOMPARE(tensors.size(), want.size());
    bool all_equal = true;
    for (const auto& v : tensors) {
      const auto t = v.toObject();
      const auto name = t["name"].toString();
      QVERIFY2(want.contains(name), qPrintable(name));
      const auto w = want[name].toObject();
      const double numel = w["numel"].toDouble();
      QCOMPARE(t["numel"].toDouble(), numel);
      QCOMPARE(double(std::llround(t["exact_fraction"].toDouble() * numel)), w["exact"].toDouble());
      QCOMPARE(t["max_abs_diff"].toDouble(), w["max_abs"].toDouble());
      all_equal = all_equal && w["exact"].toDouble() == numel;
    }
    QVERIFY(!all_equal);  // two runs' roundings differ somewhere
    QCOMPARE(got["equal"].toBool(), all_equal);
    CKPTDOC_EXPECT_EXIT(r, 1);
  }

  // The folder holding both saves: a DeepSpeed checkpoint beside a PyTorch Distributed Checkpoint is not
  // opened in its place; both are named, each with its format, and nothing is judged.
  void folderAboveBothNamesBoth() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const auto r = test::run_cli({"diagnose", e.save_dir});
    const std::string said = r.out + r.err;
    QVERIFY2(r.exit_code == 2, realds::describe(r).c_str());
    for (const auto& part :
         {std::string("holds no checkpoint itself but 2 things below it"), e.save_dir + "/deepspeed",
          e.save_dir + "/fsdp2 (a PyTorch Distributed Checkpoint)"})
      QVERIFY2(said.find(part) != std::string::npos, (part + " not in: " + said).c_str());
    QVERIFY2(said.find("No problems found") == std::string::npos, said.c_str());
  }

  // Each side named by its absolute folder whatever the user typed: a relative path to the FSDP2 side was
  // printed as typed while the DeepSpeed side's tag folder was absolute.
  void sidesAreNamedAbsolute() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const std::string ds = std::filesystem::relative(e.save_dir + "/deepspeed").string();
    const std::string fsdp = std::filesystem::relative(e.save_dir + "/fsdp2").string();
    QVERIFY(!ds.empty() && ds.front() != '/' && fsdp.front() != '/');
    const auto r = test::run_cli({"diff", ds, fsdp, "--json"});
    const auto got = realds::parse(r.out);
    QVERIFY2(!got.isEmpty(), (r.out + r.err).c_str());
    const std::string a = got["a"].toString().toStdString(), b = got["b"].toString().toStdString();
    QVERIFY2(a.find(" " + e.save_dir + "/deepspeed/") != std::string::npos, a.c_str());
    QVERIFY2(b.find(" " + e.save_dir + "/fsdp2 ") != std::string::npos, b.c_str());
  }
};

QTEST_GUILESS_MAIN(TestRealdsCrossFormat)
#include "test_realds_cross_format.moc"
