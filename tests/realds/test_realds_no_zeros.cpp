// No zeros in place of data, on real DeepSpeed checkpoints: a rank whose optimizer state lacks a moment the
// other ranks hold, or holds a 1-element tensor where a partition belongs, is an error naming the file, the
// key and the rank, and a repair refuses to write from it (before, the catalog only checked keys that were
// there, skipped 1-element tensors, and a re-partition wrote zeros for the missing moment).
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

std::string edited_copy(const realds::Entry& e, const test::TempDir& dir,
                        const std::vector<std::string>& action) {
  const std::string ckpt = realds::copy_of(e, dir);
  std::vector<std::string> args{test::source_dir() + "/tests/realds/hostile_edit.py", ckpt};
  args.insert(args.end(), action.begin(), action.end());
  const auto d = realds::python_with_deepspeed(args, e.ds);
  if (d.exit_code != 0) throw std::runtime_error("hostile_edit.py failed: " + d.err);
  return ckpt;
}

// The problems of `inspect --json` with this code.
std::vector<QJsonObject> problems(const std::string& ckpt, const QString& code) {
  const auto r = test::run_cli({"inspect", ckpt, "--json"});
  std::vector<QJsonObject> out;
  for (const auto& p :
       QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object()["problems"].toArray())
    if (p.toObject()["code"].toString() == code) out.push_back(p.toObject());
  return out;
}

}  // namespace

class TestRealdsNoZeros : public QObject {
  Q_OBJECT

 private slots:
  void lostMomentIsNamed_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("rank");
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("file");
    QTest::newRow("ZeRO-2") << "z2_fp16_dp2" << 1 << "exp_avg_sq"
                            << "zero_pp_rank_1_mp_rank_00_optim_states.pt";
    QTest::newRow("ZeRO-3") << "z3_fp16_dp2" << 0 << "exp_avg"
                            << "zero_pp_rank_0_mp_rank_00_optim_states.pt";
    QTest::newRow("BF16_Optimizer") << "bf16opt_s1_dp2" << 1 << "exp_avg"
                                    << "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt";
  }
  void lostMomentIsNamed() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(int, rank);
    QFETCH(QString, key);
    QFETCH(QString, file);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const std::string ckpt = edited_copy(e, dir, {"drop-moment", std::to_string(rank), key.toStdString()});
    const auto found = problems(ckpt, "optimizer-state-incomplete");
    QVERIFY(!found.empty());
    for (const auto& p : found) {
      QCOMPARE(p["severity"].toString(), QString("error"));
      QCOMPARE(p["file"].toString(), file);
      QCOMPARE(p["ranks"].toArray(), QJsonArray{rank});
      QVERIFY2(p["message"].toString().contains("'" + key + "'"), qPrintable(p["message"].toString()));
    }
    auto r = test::run_cli({"diagnose", ckpt, "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    QVERIFY2(r.out.find("optimizer-state-incomplete") != std::string::npos, r.out.c_str());
    // A repair that would carry the moments refuses, naming the file and the key; nothing is written.
    r = test::run_cli(
        {"repair", ckpt, "-o", dir.file("out"), "--repartition", "--world-size", "3", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find(file.toStdString()) != std::string::npos &&
                 r.err.find(key.toStdString()) != std::string::npos,
             r.err.c_str());
    QVERIFY(!fs::exists(dir.file("out")));
  }

  // A 1-element tensor where rank 1's exp_avg partition belongs (ZeRO-3 partitions can be that small, so size
  // 1 is not skipped as if it were a scalar step).
  void oneElementMomentIsChecked() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z3_fp16_dp4_subgroups");
    test::TempDir dir;
    const std::string ckpt = edited_copy(e, dir, {"shrink-moment", "1", "exp_avg"});
    bool named = false;
    for (const auto& p : problems(ckpt, "optimizer-state-shape-mismatch"))
      named =
          named || (p["message"].toString().contains("'exp_avg'") && p["ranks"].toArray() == QJsonArray{1} &&
                    p["message"].toString().contains("has 1 elements"));
    QVERIFY(named);
    const auto r = test::run_cli({"diagnose", ckpt, "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 1);
  }
};

CKPTDOC_TEST_MAIN(TestRealdsNoZeros)
#include "test_realds_no_zeros.moc"
