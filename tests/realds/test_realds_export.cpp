// `ckptdoc export` equals DeepSpeed's own zero_to_fp32.py, run from the DeepSpeed version that wrote the
// checkpoint, tensor for tensor and bit for bit (same names and order, dtypes, shapes, bytes), on real
// checkpoints of every layout: ZeRO-1/2/3, fp16/bf16, tied and frozen params, ZeRO-3 sub-groups, v0.14.5.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>
#include <map>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

class TestRealdsExport : public QObject {
  Q_OBJECT

 private slots:
  void exportEqualsZeroToFp32_data() {
    QTest::addColumn<QString>("name");
    for (const char* n :
         {"z1_fp16_dp4_edge", "z2_fp16_dp3_edge", "z2_bf16_dp4", "z2_fp16_dp1_fresh", "z3_fp16_dp4_subgroups",
          "z3_bf16_dp3_fresh", "v145_z2_fp16_dp2", "v145_z2_bf16_dp3"})
      QTest::newRow(n) << QString(n);
  }
  void exportEqualsZeroToFp32() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto out = dir.file("model.pt");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", out, "--format", "torch"}), 0);
    const auto ref = realds::reference(e.name, "zero_to_fp32");
    // The same for safetensors, the format people pass on; both compared by one run (a torch start is
    // seconds).
    const auto st = dir.file("model.safetensors");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", st, "--format", "safetensors"}), 0);
    CKPTDOC_EXPECT_EXIT(
        test::run_python(test::script("fixtures/compare_state_dicts.py"), {out, ref, "--then", st, ref}), 0);
  }

  // A run that diverged and was saved (fp32 masters of rank 1 all NaN): asked for with --force (the diagnosis
  // calls such masters wrong), the export writes what is there, but says which tensors hold NaN/Inf and how
  // many (stderr and --json, counts equal to torch's own count of the file written), and --strict refuses and
  // leaves nothing behind. The lp weights, finite, export quietly.
  void nonFiniteValuesAreNamedAndStrictRefuses() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z2_fp16_dp2");
    test::TempDir dir;
    const std::string ckpt = realds::copy_of(e, dir);
    CKPTDOC_EXPECT_EXIT(realds::python_with_deepspeed(
                            {test::source_dir() + "/tests/realds/damage.py", ckpt, "nan-fp32", "1"}, e.ds),
                        0);

    const auto out = dir.file("model.pt");
    // The diagnosis calls such masters wrong (fp32-master-mismatch): exported only when asked for with
    // --force.
    const auto refused = test::run_cli({"export", ckpt, "-o", out});
    CKPTDOC_EXPECT_EXIT(refused, 2);
    const auto r = test::run_cli({"export", ckpt, "-o", out, "--json", "--force"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.err.find("holds NaN or Inf values") != std::string::npos, r.err.c_str());
    const auto counted =
        realds::python_with_deepspeed({test::source_dir() + "/tests/realds/count_nonfinite.py", out}, e.ds);
    CKPTDOC_EXPECT_EXIT(counted, 0);
    const QJsonObject torch_counts = QJsonDocument::fromJson(QByteArray::fromStdString(counted.out)).object();
    std::map<std::string, std::pair<qint64, qint64>> expected, reported;
    for (auto it = torch_counts.begin(); it != torch_counts.end(); ++it) {
      const auto o = it.value().toObject();
      if (o["nan"].toInteger() + o["inf"].toInteger() > 0)
        expected[it.key().toStdString()] = {o["nan"].toInteger(), o["inf"].toInteger()};
    }
    QVERIFY2(!expected.empty(), "the damaged masters exported no NaN: the damage did not take");
    const auto j = QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
    for (const auto& v : j["non_finite"].toArray()) {
      const auto o = v.toObject();
      reported[o["name"].toString().toStdString()] = {o["nan"].toInteger(), o["inf"].toInteger()};
      QVERIFY2(r.err.find(o["name"].toString().toStdString() + ":") != std::string::npos, r.err.c_str());
    }
    QVERIFY(reported == expected);

    for (const std::vector<std::string>& where :
         {std::vector<std::string>{"-o", dir.file("strict.safetensors")},
          std::vector<std::string>{"-o", dir.file("shards"), "--max-shard-size", "100KB"}}) {
      std::vector<std::string> args{"export", ckpt, "--strict", "--force"};
      args.insert(args.end(), where.begin(), where.end());
      const auto s = test::run_cli(args);
      CKPTDOC_EXPECT_EXIT(s, 2);
      QVERIFY2(s.err.find("--strict") != std::string::npos && s.err.find("NaN") != std::string::npos,
               s.err.c_str());
      // Named by the path asked for (-o, or a shard in it), never by a temporary one that is gone.
      QVERIFY2(s.err.find(where[1]) != std::string::npos, s.err.c_str());
      QVERIFY2(s.err.find("ckptdoc-partial") == std::string::npos &&
                   s.err.find("ckptdoc-tmp") == std::string::npos,
               s.err.c_str());
      QCOMPARE(test::files_in(dir.path()),
               (std::vector<std::string>{"in", "model.pt"}));  // nothing new, no leftovers
    }

    const auto lp =
        test::run_cli({"export", ckpt, "-o", dir.file("lp.safetensors"), "--source", "lp", "--strict"});
    CKPTDOC_EXPECT_EXIT(lp, 0);
    QVERIFY2(lp.err.find("NaN") == std::string::npos, lp.err.c_str());
  }

  // DeepSpeed #762 as v0.12.6 writes it (a fresh engine loaded the weights without optimizer states, then
  // saved): the fp32 masters are random initial values, and an export of them wrote those as "the weights"
  // with exit 0. Now it is refused naming the finding and the ways on; --source lp writes the weights
  // DeepSpeed saved (equal, in torch, to torch.load of the model file's module), and --force still writes the
  // masters.
  void staleMastersAreNotExportedUnasked() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("seed_z2_fp16_no_optim");
    test::TempDir dir;
    const auto out = dir.file("model.pt");
    const auto r = test::run_cli({"export", e.save_dir, "-o", out});
    CKPTDOC_EXPECT_EXIT(r, 2);
    for (const char* words : {"fp32-master-mismatch", "--source lp", "--refresh-fp32", "--force"})
      QVERIFY2(r.err.find(words) != std::string::npos, r.err.c_str());
    QVERIFY(!std::filesystem::exists(out));

    const auto lp = dir.file("lp.pt");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", lp, "--source", "lp"}), 0);
    const auto d = realds::python_with_deepspeed(
        {test::source_dir() + "/tests/realds/state_dict_diff.py", lp, realds::reference(e.name, "lp")}, e.ds);
    CKPTDOC_EXPECT_EXIT(d, 0);
    const auto j = QJsonDocument::fromJson(QByteArray::fromStdString(d.out)).object();
    QVERIFY2(j["differ"].toObject().isEmpty() && j["only_a"].toArray().isEmpty() &&
                 j["only_b"].toArray().isEmpty(),
             d.out.c_str());

    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", out, "--force"}), 0);
    QVERIFY(std::filesystem::exists(out));
  }
};

CKPTDOC_TEST_MAIN(TestRealdsExport)
#include "test_realds_export.moc"
