// Ulysses sequence parallelism as DeepSpeed 0.19 writes it (tests/realds/ulysses_train.py: ALST's
// parallel_state_sp as the engine's mpu). What the real files hold: one mp_rank_00 model file (every SP rank
// holds the whole model), ZeRO partitions over the sequence-data-parallel group (dp_world_size = sp x dp, one
// optimizer file per rank, all named mp_rank_00), mp_world_size 1, and checkpoint_parallel_dimensions tensor
// = the SP size (the mpu answers the model-parallel size with it). ckptdoc used to call that a
// topology-mismatch error. DeepSpeed 0.18.4 names each rank's optimizer file by its sequence-parallel rank
// instead (zero_pp_rank_D_mp_rank_{D % sp}), writes no checkpoint_parallel_dimensions, and no DeepSpeed loads
// those files under their names: ckptdoc reads them as the same job and says how to rename them.
#include <QDir>
#include <QJsonArray>
#include <QtTest>
#include <filesystem>
#include <set>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

std::set<std::string> as_set(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

}  // namespace

class TestRealdsUlysses : public QObject {
  Q_OBJECT

 private slots:
  void sequenceParallelReplicasAreNotTensorSlices_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("prefix");  // of the optimizer files
    QTest::addColumn<int>("dp_world_size");
    QTest::addColumn<QString>("split");  // sp x dp as the finding names it
    QTest::newRow("sp2 z1 bf16") << "v019_ulysses_sp2"
                                 << "bf16_zero_pp_rank_" << 2 << "2 x 1";
    QTest::newRow("sp2 dp2 z2 fp16") << "v019_ulysses_sp2_dp2"
                                     << "zero_pp_rank_" << 4 << "2 x 2";
    QTest::newRow("0.18.4 sp2 z1 bf16") << "v0184_ulysses_sp2"
                                        << "bf16_zero_pp_rank_" << 2 << "2 x 1";
    QTest::newRow("0.18.4 sp2 dp2 z2 fp16") << "v0184_ulysses_sp2_dp2"
                                            << "zero_pp_rank_" << 4 << "2 x 2";
  }

  void sequenceParallelReplicasAreNotTensorSlices() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, name);
    QFETCH(QString, prefix);
    QFETCH(int, dp_world_size);
    QFETCH(QString, split);
    const auto e = realds::checkpoint(name.toStdString());
    const bool v0184 = e.ds == "0.18.4";

    // What DeepSpeed wrote: no model file of a second model-parallel rank, one optimizer file per sp x dp
    // rank, named mp_rank_00 by 0.19 and by the rank's sequence-parallel rank (r % 2) by 0.18.4.
    QStringList want{"mp_rank_00_model_states.pt"};
    for (int r = 0; r < dp_world_size; ++r)
      want << prefix + QString::number(r) + "_mp_rank_0" + QString::number(v0184 ? r % 2 : 0) +
                  "_optim_states.pt";
    want.sort();
    QCOMPARE(QDir(QString::fromStdString(e.tag_dir())).entryList(QDir::Files, QDir::Name), want);

    const auto report = realds::diagnose_json(e.save_dir, 0);
    QVERIFY(realds::codes(report, "error").empty());
    if (v0184) {
      QCOMPARE(realds::codes(report, "warning"), std::vector<std::string>{"sequence-parallel-file-names"});
      // The renames it asks for: every odd rank's file to its mp_rank_00 name.
      const QString renames =
          realds::finding(report, "sequence-parallel-file-names")["details"].toObject()["renames"].toString();
      QStringList want_renames;
      for (int r = 1; r < dp_world_size; r += 2)
        want_renames << prefix + QString::number(r) + "_mp_rank_01_optim_states.pt -> " + prefix +
                            QString::number(r) + "_mp_rank_00_optim_states.pt";
      QCOMPARE(renames, want_renames.join(", "));
    } else {
      QVERIFY(realds::codes(report, "warning").empty());
    }
    QCOMPARE(as_set(realds::codes(report, "info")),
             (std::set<std::string>{"sequence-parallel", "not-analysed"}));
    const auto sp = realds::finding(report, "sequence-parallel");
    QCOMPARE(sp["details"].toObject()["sequence_parallel_size"].toString(), QString("2"));
    const auto msg = sp["message"].toString();
    QVERIFY2(msg.contains("Ulysses sequence-parallel job of 2 ranks") && msg.contains("whole replica") &&
                 msg.contains("dp_world_size " + QString::number(dp_world_size) +
                              " ranks (sequence-parallel x "
                              "data-parallel: " +
                              split + ")"),
             qPrintable(msg));
    // Read as one data-parallel job of sp x dp ranks: no tensor-parallel slices to merge.
    const auto parallel = report["parallel"].toObject();
    QCOMPARE(parallel["tp"].toInt(), 1);
    QCOMPARE(parallel["mp_world_size"].toInt(), 1);
    QCOMPARE(report["dp_world_size"].toInt(), dp_world_size);
    // A verdict that compared every master and moment of the 8 params of model A.
    const auto verdict = report["verdict"].toObject();
    QCOMPARE(verdict["kind"].toString(), QString(v0184 ? "problems" : "clean"));
    QCOMPARE(verdict["masters_compared"].toInt(), 8);
    QCOMPARE(verdict["moments_checked"].toInt(), 8);

    // The export warns of nothing and equals 0.19's own zero_to_fp32.py output.
    test::TempDir dir;
    const auto st = dir.file("model.safetensors");
    const auto r = test::run_cli({"export", e.save_dir, "-o", st});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.err.find("topology-mismatch") == std::string::npos, r.err.c_str());
    CKPTDOC_EXPECT_EXIT(test::run_python(test::script("fixtures/compare_state_dicts.py"),
                                         {st, realds::reference(e.name, "zero_to_fp32")}),
                        0);
  }

  // Stale masters on one rank are found through the SP layout, and --refresh-fp32's output is loaded by
  // 0.19's engine with the same Ulysses groups (tests/realds/ulysses_load_check.py): every rank's masters
  // equal its partitions of the weights (the damaged input: 1.1 apart), and a step trains.
  void refreshLoadsWithTheSequenceParallelGroups() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_ulysses_sp2");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    CKPTDOC_EXPECT_EXIT(realds::python_with_deepspeed(
                            {test::source_dir() + "/tests/realds/damage.py", in, "stale-fp32", "1"}, e.ds),
                        0);
    const auto report = realds::diagnose_json(in, 1);
    QVERIFY(realds::has_code(report, "error", "fp32-master-mismatch"));
    QVERIFY(realds::has_code(report, "info", "sequence-parallel"));
    QVERIFY(!realds::has_code(report, "error", "topology-mismatch"));
    const auto out = dir.file("fixed");
    CKPTDOC_EXPECT_EXIT(realds::repair(in, out, {"--refresh-fp32"}), 0);
    const auto logs = dir.file("load");
    const auto r = realds::launch({test::source_dir() + "/tests/realds/ulysses_load_check.py", out, "--sp",
                                   "2", "--stage", std::to_string(e.stage), "--dtype", e.dtype},
                                  2, e.ds, logs);
    QVERIFY2(r.exit_code == 0, realds::describe(r).c_str());
    const auto line = test::read_text(logs + "/rank0.log");
    QVERIFY2(line.find("max|master - weight| 0;") != std::string::npos, line.c_str());
  }

  // 0.18.4's files: stale masters on rank 1 (the one named mp_rank_01) are found, --refresh-fp32 keeps the
  // names, and renamed as sequence-parallel-file-names says, 0.19's engine loads them with the same Ulysses
  // groups: every master equals its weight and a step trains. Under 0.18.4's names 0.19 does not find rank
  // 1's file (the first launch).
  void v0184NamesRenamedLoadInV019() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v0184_ulysses_sp2");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    CKPTDOC_EXPECT_EXIT(realds::python_with_deepspeed(
                            {test::source_dir() + "/tests/realds/damage.py", in, "stale-fp32", "1"}, e.ds),
                        0);
    const auto report = realds::diagnose_json(in, 1);
    const auto stale = realds::finding(report, "fp32-master-mismatch");
    QVERIFY2(stale["ranks"].toArray() == QJsonArray{1}, qPrintable(QJsonDocument(stale).toJson()));
    const auto out = dir.file("fixed");
    CKPTDOC_EXPECT_EXIT(realds::repair(in, out, {"--refresh-fp32"}), 0);
    const auto tag = "/" + e.tag + "/";
    const auto as_saved = dir.file("fixed-as-saved");
    test::copy_tree(out, as_saved);
    auto r = realds::launch({test::source_dir() + "/tests/realds/ulysses_load_check.py", as_saved, "--sp",
                             "2", "--stage", std::to_string(e.stage), "--dtype", e.dtype},
                            2, "0.19", dir.file("load-as-saved"));
    QVERIFY2(
        r.exit_code != 0 && test::read_text(dir.file("load-as-saved/rank1.log")).find("FileNotFoundError") !=
                                std::string::npos,
        realds::describe(r).c_str());
    const auto renames = realds::finding(realds::diagnose_json(out, 0), "sequence-parallel-file-names");
    const auto pair = renames["details"].toObject()["renames"].toString().split(" -> ");
    QCOMPARE(pair.size(), 2);
    std::filesystem::rename(out + tag + pair[0].toStdString(), out + tag + pair[1].toStdString());
    r = realds::launch({test::source_dir() + "/tests/realds/ulysses_load_check.py", out, "--sp", "2",
                        "--stage", std::to_string(e.stage), "--dtype", e.dtype},
                       2, "0.19", dir.file("load"));
    QVERIFY2(r.exit_code == 0, realds::describe(r).c_str());
    const auto line = test::read_text(dir.file("load/rank0.log"));
    QVERIFY2(line.find("max|master - weight| 0;") != std::string::npos, line.c_str());
  }

  // The same files with mp_world_size 2 are a tensor-parallel job that lost rank 1: the info must not hide
  // that.
  void aLostTensorRankIsNotSequenceParallel() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_ulysses_sp2");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    CKPTDOC_EXPECT_EXIT(realds::python_with_deepspeed({"-c",
                                                       "import sys, torch\n"
                                                       "sd = torch.load(sys.argv[1])\n"
                                                       "sd['mp_world_size'] = 2\n"
                                                       "torch.save(sd, sys.argv[1])\n",
                                                       in + "/" + e.tag + "/mp_rank_00_model_states.pt"},
                                                      e.ds),
                        0);
    const auto report = realds::diagnose_json(in, 1);
    QVERIFY(realds::has_code(report, "error", "rank-file-missing"));
    QVERIFY(!realds::has_code(report, "info", "sequence-parallel"));
  }
};

QTEST_GUILESS_MAIN(TestRealdsUlysses)
#include "test_realds_ulysses.moc"
