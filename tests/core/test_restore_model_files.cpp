// repair --restore-model-files on the committed ZeRO-3 fixture (DeepSpeed 0.12.6) with a rank's model file
// deleted: the file is written back as a copy of another rank's, and the output holds the same values as the
// original. Without checkpoint.load_universal in the saved config the #7546 finding is not made: only the
// files' own evidence names a cause. (tests/realds/test_realds_model_files_7546.cpp: the real #7546 files.)
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>
#include <filesystem>

#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckptdoc;

namespace {

QJsonObject json_of(const test::RunResult& r) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

bool has_code(const QJsonObject& report, const QString& code) {
  for (const auto& f : report["findings"].toArray())
    if (f.toObject()["code"].toString() == code) return true;
  return false;
}

// The fixture's save folder with rank `lost`'s ZeRO-3 model file removed; returns the folder.
std::string without_model_file(const test::TempDir& tmp, int lost) {
  const std::string dir = tmp.file("in");
  test::copy_tree(test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint", dir);
  const std::string tag = test::read_text(dir + "/latest");
  fs::remove(dir + "/" + tag + "/zero_pp_rank_" + std::to_string(lost) + "_mp_rank_00_model_states.pt");
  return dir;
}

}  // namespace

class TestRestoreModelFiles : public QObject {
  Q_OBJECT

 private slots:
  void missingModelFileRestored_data() {
    QTest::addColumn<int>("lost");
    QTest::newRow("rank 1's") << 1;
    QTest::newRow("rank 0's (copied from rank 1)") << 0;
  }
  void missingModelFileRestored() {
    QFETCH(int, lost);
    test::TempDir tmp;
    const std::string in = without_model_file(tmp, lost);
    auto r = test::run_cli({"diagnose", in, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    QVERIFY(has_code(json_of(r), "rank-file-missing"));
    QVERIFY(!has_code(json_of(r), "zero3-model-files-not-saved"));  // no load_universal in its config
    r = test::run_cli({"diagnose", in});
    QVERIFY2(r.out.find("fix: ckptdoc repair " + in + " -o " + in + "-fixed --restore-model-files") !=
                 std::string::npos,
             r.out.c_str());

    r = test::run_cli({"repair", in, "-o", tmp.file("out"), "--restore-model-files", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const std::string tag = test::read_text(in + "/latest");
    const auto name = [&](int rank) {
      return "/zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_model_states.pt";
    };
    QCOMPARE(test::read_text(tmp.file("out/") + tag + name(lost)),
             test::read_text(in + "/" + tag + name(1 - lost)));
    // Every other file as it was, and the output equal to the original checkpoint in every value.
    QCOMPARE(test::read_text(tmp.file("out/") + tag + "/zero_pp_rank_1_mp_rank_00_optim_states.pt"),
             test::read_text(in + "/" + tag + "/zero_pp_rank_1_mp_rank_00_optim_states.pt"));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", tmp.file("out")}), 0);
    const std::string original = test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint";
    for (const char* what : {"fp32", "exp_avg", "exp_avg_sq"})
      CKPTDOC_EXPECT_EXIT(test::run_cli({"diff", original, tmp.file("out"), "--what", what}), 0);
  }

  void refusedWhereItDoesNotApply() {
    test::TempDir tmp;
    // ZeRO-2 keeps one model file for all ranks.
    auto r = test::run_cli({"repair", test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", "-o",
                            tmp.file("z2"), "--restore-model-files"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("only ZeRO-3 saves a model file per data-parallel rank") != std::string::npos,
             r.err.c_str());
    // Nothing missing.
    r = test::run_cli({"repair", test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint", "-o",
                       tmp.file("z3"), "--restore-model-files"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("nothing to restore") != std::string::npos, r.err.c_str());
    // Not with another repair.
    r = test::run_cli({"repair", without_model_file(tmp, 1), "-o", tmp.file("both"), "--restore-model-files",
                       "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("runs alone") != std::string::npos, r.err.c_str());
    QVERIFY(!fs::exists(tmp.file("z2")) && !fs::exists(tmp.file("z3")) && !fs::exists(tmp.file("both")));
  }
};

QTEST_GUILESS_MAIN(TestRestoreModelFiles)
#include "test_restore_model_files.moc"
