// DeepSpeed #7546, written by the real DeepSpeed 0.17.6 (the last release before 0.18.0 fixed it): with
// checkpoint.load_universal in the config, every ZeRO-3 rank saves its model file under rank 0's name, and
// only zero_pp_rank_0_*_model_states.pt is left. ckptdoc names it (and only where the files show it),
// restores the missing model files, and DeepSpeed 0.17.6 and 0.19 load the restored folder with the masters
// and moments of the same run saved whole (its twin without the setting: the harness is deterministic), and
// train a step.
#include <QJsonArray>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

class TestRealdsModelFiles7546 : public QObject {
  Q_OBJECT

 private slots:
  void onlyRankZeroModelFileNamedAndRestored() {
    REALDS_REQUIRE_DS("0.17.6");
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v0176_z3_fp16_dp2_load_universal");
    const auto twin = realds::checkpoint("v0176_z3_fp16_dp2");
    QVERIFY(fs::exists(e.tag_dir() + "/zero_pp_rank_0_mp_rank_00_model_states.pt"));
    QVERIFY(!fs::exists(e.tag_dir() + "/zero_pp_rank_1_mp_rank_00_model_states.pt"));  // the bug, as written

    const auto report = realds::diagnose_json(e.save_dir, 1);
    const auto f = realds::finding(report, "zero3-model-files-not-saved");
    QCOMPARE(f["severity"].toString(), QString("error"));
    QCOMPARE(f["ranks"].toArray(), QJsonArray{1});
    QVERIFY2(f["message"].toString().contains("#7546") && f["message"].toString().contains("0.17.6"),
             qPrintable(f["message"].toString()));
    // The same run saved whole: nothing of it.
    QVERIFY(
        !realds::has_code(realds::diagnose_json(twin.save_dir, 0), "error", "zero3-model-files-not-saved"));
    // As the finding says, DeepSpeed cannot load the folder as written.
    QVERIFY(realds::load(e.save_dir, twin.name, {}, 0, "0.19").exit_code != 0);

    test::TempDir dir;
    const auto out = dir.file("fixed");
    const auto r = realds::repair(e.save_dir, out, {"--restore-model-files"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(fs::exists(out + "/" + e.tag + "/zero_pp_rank_1_mp_rank_00_model_states.pt"));
    QVERIFY(realds::codes(realds::diagnose_json(out, 0), "error").empty());
    for (const char* ds : {"0.17.6", "0.19"}) {
      const auto c = realds::load(out, twin.name,
                                  {"--strict", "--expect-fp32", realds::reference(twin.name, "fp32"),
                                   "--expect-moments", realds::reference(twin.name, "moments")},
                                  0, ds);
      REALDS_EXPECT_STRICT(c);
    }
  }

  // A ZeRO-3 job with a frozen param: each rank's model file holds its own fragments of it
  // (frozen_param_fragments), so a copy of another rank's file would not restore it. The repair refuses and
  // writes nothing. A real 0.19 save with rank 1's model file removed by hand (a derived case: no release
  // writes it so).
  void restoreRefusedWithFrozenParams() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_z3_fp16_dp2_edge");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    const auto gone = in + "/" + e.tag + "/zero_pp_rank_1_mp_rank_00_model_states.pt";
    QVERIFY(fs::remove(gone));
    // Not #7546 (0.19 saves every rank's file): the plain missing-file error, and why no repair runs.
    const auto report = realds::diagnose_json(in, 1);
    QVERIFY(realds::finding(report, "zero3-model-files-not-saved").isEmpty());
    const auto missing = realds::finding(report, "rank-file-missing");
    QCOMPARE(missing["ranks"].toArray(), QJsonArray{1});
    QVERIFY2(missing["message"].toString().contains("frozen_param_fragments"),
             qPrintable(missing["message"].toString()));
    const auto out = dir.file("fixed");
    const auto r = realds::repair(in, out, {"--restore-model-files"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("frozen") != std::string::npos &&
                 r.err.find("frozen_param_fragments") != std::string::npos,
             r.err.c_str());
    QVERIFY(!fs::exists(out));
  }
};

QTEST_GUILESS_MAIN(TestRealdsModelFiles7546)
#include "test_realds_model_files_7546.moc"
