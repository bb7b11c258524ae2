// Nothing dropped silently, on real DeepSpeed checkpoints: every element diagnose does not analyse is counted
// in a not-analysed finding, a warning where data a user expects was skipped (a rank missing, a moment lost,
// a short partition, masters in another dtype, a weight missing) and info where there is by design nothing to
// compare (padding, ZeRO-3 placeholder weights); strided partitions are analysed like contiguous ones.
// Healthy checkpoints stay clean: no warning (test_realds_diagnose checks every matrix entry).
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <map>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

QJsonObject cli_json(const std::vector<std::string>& args) {
  const auto r = test::run_cli(args);
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

QJsonObject diagnose(const std::string& ckpt) {
  return cli_json({"diagnose", ckpt, "--json", "--device", "cpu"});
}

// The evidence of the not-analysed finding of this severity ({} when there is none).
QJsonObject not_analysed(const QJsonObject& report, const QString& severity) {
  for (const auto& f : report["findings"].toArray()) {
    const auto o = f.toObject();
    if (o["code"].toString() == "not-analysed" && o["severity"].toString() == severity)
      return o["evidence"].toObject();
  }
  return {};
}

// Sums over the catalog's layout (inspect --json): padding of every rank, real elements of one rank.
double padding_of(const QJsonObject& inspect) {
  double n = 0;
  for (const auto& g : inspect["groups"].toArray())
    for (const auto& p : g.toObject()["partitions"].toArray()) n += p.toObject()["padding"].toDouble();
  return n;
}
double real_numel_of_rank(const QJsonObject& inspect, int rank) {
  double n = 0;
  for (const auto& g : inspect["groups"].toArray())
    for (const auto& p : g.toObject()["partitions"].toArray())
      if (p.toObject()["rank"].toInt() == rank) n += p.toObject()["real_numel"].toDouble();
  return n;
}

std::string edited(const realds::Entry& e, const test::TempDir& dir, const std::vector<std::string>& action) {
  const std::string ckpt = realds::copy_of(e, dir);
  std::vector<std::string> args{test::source_dir() + "/tests/realds/hostile_edit.py", ckpt};
  args.insert(args.end(), action.begin(), action.end());
  const auto d = realds::python_with_deepspeed(args, e.ds);
  if (d.exit_code != 0) throw std::runtime_error("hostile_edit.py failed: " + d.err);
  return ckpt;
}

// Per-param numbers of a report, without the per-rank split.
std::map<QString, QByteArray> numbers(const QJsonObject& report) {
  std::map<QString, QByteArray> out;
  for (const auto& p : report["params"].toArray()) {
    auto o = p.toObject();
    o.remove("per_rank");
    out[o["name"].toString()] = QJsonDocument(o).toJson(QJsonDocument::Compact);
  }
  return out;
}

}  // namespace

class TestRealdsNotAnalysed : public QObject {
  Q_OBJECT

 private slots:
  // Padding, and ZeRO-3's placeholder weights: info, with exact counts.
  void nothingToCompareIsInfo_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"z2_fp16_dp2", "z1_fp16_dp4_edge", "z3_fp16_dp2", "bf16opt_s0_dp3"})
      QTest::newRow(n) << QString(n);
  }
  void nothingToCompareIsInfo() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    const auto inspect = cli_json({"inspect", e.save_dir, "--json"});
    const auto report = diagnose(e.save_dir);
    QVERIFY(not_analysed(report, "warning").isEmpty());
    const auto info = not_analysed(report, "info");
    QCOMPARE(info["padding"].toDouble(), padding_of(inspect));
    if (e.stage == 3)
      QCOMPARE(info["zero3_placeholders"].toDouble(), inspect["trainable_numel"].toDouble());
    else
      QVERIFY(!info.contains("zero3_placeholders"));
  }

  // Data that should be there and was skipped: a warning naming the reason and the count.
  void skippedDataIsAWarning_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QStringList>("action");
    QTest::addColumn<QString>("reason");
    QTest::newRow("moment lost") << "z2_fp16_dp2" << QStringList{"drop-moment", "1", "exp_avg"}
                                 << "moment_missing";
    QTest::newRow("1-element moment")
        << "z3_fp16_dp4_subgroups" << QStringList{"shrink-moment", "1", "exp_avg"} << "partition_short";
    QTest::newRow("masters in float64")
        << "z2_fp16_dp2" << QStringList{"fp32-double", "0"} << "fp32_not_float32";
    QTest::newRow("weight missing") << "z2_fp16_dp2" << QStringList{"drop-weight", "fc1.weight"}
                                    << "lp_missing";
    QTest::newRow("rank missing") << "z2_bf16_dp4" << QStringList{} << "rank_unreadable";
  }
  void skippedDataIsAWarning() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(QStringList, action);
    QFETCH(QString, reason);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    std::string ckpt;
    if (action.isEmpty()) {
      ckpt = realds::copy_of(e, dir);
      fs::remove(ckpt + "/" + e.tag + "/bf16_zero_pp_rank_3_mp_rank_00_optim_states.pt");
    } else {
      std::vector<std::string> a;
      for (const auto& s : action) a.push_back(s.toStdString());
      ckpt = edited(e, dir, a);
    }
    const auto report = diagnose(ckpt);
    const auto warning = not_analysed(report, "warning");
    QVERIFY2(warning[reason].toDouble() > 0,
             QJsonDocument(report["findings"].toArray()).toJson().left(4000).constData());
    const auto inspect = cli_json({"inspect", e.save_dir, "--json"});
    if (reason == "moment_missing") QCOMPARE(warning[reason].toDouble(), real_numel_of_rank(inspect, 1));
    if (reason == "rank_unreadable") {
      QCOMPARE(warning[reason].toDouble(), real_numel_of_rank(inspect, 3));
      // One finding for the missing file (the catalog's), not a second one from the scan.
      for (const auto& f : report["findings"].toArray())
        QVERIFY(f.toObject()["code"].toString() != "rank-file-unreadable");
    }
    if (reason == "lp_missing") QCOMPARE(warning[reason].toDouble(), 96.0 * 301.0);
  }

  // Masters saved in fp16 (as fp16_master_weights_and_grads keeps them) are compared as stored, not skipped:
  // rank 0's fp16 masters are the rounding of its fp32 ones, so they equal their fp16 weights exactly. Its
  // moments stay float32, which a resume would cast to the fp16 masters' dtype: the one warning is that.
  void halfMastersAreComparedAsStored() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z2_fp16_dp2");
    test::TempDir dir;
    const std::string ckpt = edited(e, dir, {"fp32-half", "0"});
    const auto report = diagnose(ckpt);
    QVERIFY(not_analysed(report, "warning").isEmpty());
    QCOMPARE(realds::codes(report, "warning"), std::vector<std::string>{"moments-flushed-on-resume"});
    QVERIFY(realds::codes(report, "error").empty());
    const auto info = realds::codes(report, "info");
    QVERIFY(std::find(info.begin(), info.end(), "masters-in-16-bit") != info.end());
    for (const auto& p : report["params"].toArray())
      QCOMPARE(p.toObject()["lp_vs_fp32"].toObject()["exact_fraction"].toDouble(), 1.0);
  }

  // Strided (non-contiguous) master partitions are analysed, not skipped: the same numbers as the original.
  void stridedPartitionsAreAnalysed() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z2_fp16_dp2");
    test::TempDir dir;
    const std::string ckpt = edited(e, dir, {"strided-fp32", "1"});
    const auto report = diagnose(ckpt);
    QVERIFY(not_analysed(report, "warning").isEmpty());
    QVERIFY(numbers(report) == numbers(diagnose(e.save_dir)));
  }
};

CKPTDOC_TEST_MAIN(TestRealdsNotAnalysed)
#include "test_realds_not_analysed.moc"
