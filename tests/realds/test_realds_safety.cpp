// Hostile and corrupted copies of real DeepSpeed checkpoints: a model file whose pickle calls posix.system is
// named by ls, inspect and diagnose (unsafe-pickle, with file, record, callable and how it is reached) and a
// repair refuses to carry it; files claiming dp_world_size and partition_count 2^31-1 are refused at once;
// no file real DeepSpeed wrote is flagged.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

std::string hostile_copy(const realds::Entry& e, const test::TempDir& dir, const std::string& action) {
  const std::string ckpt = realds::copy_of(e, dir);
  const auto d = realds::python_with_deepspeed(
      {test::source_dir() + "/tests/realds/hostile_edit.py", ckpt, action}, e.ds);
  if (d.exit_code != 0) throw std::runtime_error("hostile_edit.py " + action + " failed: " + d.err);
  return ckpt;
}

// The unsafe-pickle entries of a findings/problems array.
std::vector<QJsonObject> unsafe(const QJsonArray& list) {
  std::vector<QJsonObject> out;
  for (const auto& v : list)
    if (v.toObject()["code"].toString() == "unsafe-pickle") out.push_back(v.toObject());
  return out;
}

}  // namespace

class TestRealdsSafety : public QObject {
  Q_OBJECT

 private slots:
  void posixSystemInTheModelFileIsNamed() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z2_fp16_dp2");
    test::TempDir dir;
    const std::string ckpt = hostile_copy(e, dir, "payload-model");
    const std::string model = ckpt + "/" + e.tag + "/mp_rank_00_model_states.pt";

    // diagnose --json: exit 1, the finding names file, record, callable and how.
    auto r = test::run_cli({"diagnose", ckpt, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    auto found = unsafe(realds::parse(r.out)["findings"].toArray());
    QCOMPARE(found.size(), size_t(1));
    QCOMPARE(found[0]["severity"].toString(), QString("error"));
    const auto d = found[0]["details"].toObject();
    QCOMPARE(d["callable"].toString(), QString("posix.system"));
    QCOMPARE(d["file"].toString(), QString("mp_rank_00_model_states.pt"));
    QVERIFY2(d["record"].toString().endsWith("data.pkl"), qPrintable(d["record"].toString()));
    QCOMPARE(d["how"].toString(), QString("REDUCE"));
    // Nothing else is wrong with it.
    QCOMPARE(realds::codes(realds::parse(r.out), "error"), std::vector<std::string>{"unsafe-pickle"});
    // Text report.
    r = test::run_cli({"diagnose", ckpt, "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    QVERIFY2(
        r.out.find("unsafe-pickle") != std::string::npos && r.out.find("posix.system") != std::string::npos,
        r.out.c_str());

    // ls and inspect print it and keep their exit codes.
    r = test::run_cli({"ls", model});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(
        r.out.find("unsafe-pickle") != std::string::npos && r.out.find("posix.system") != std::string::npos,
        r.out.c_str());
    r = test::run_cli({"ls", model, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    found = unsafe(realds::parse(r.out)["findings"].toArray());
    QCOMPARE(found.size(), size_t(1));
    QCOMPARE(found[0]["callable"].toString(), QString("posix.system"));
    r = test::run_cli({"inspect", ckpt});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("unsafe-pickle") != std::string::npos, r.out.c_str());
    r = test::run_cli({"inspect", ckpt, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(unsafe(realds::parse(r.out)["problems"].toArray()).size(), size_t(1));

    // repair refuses to copy it (exit 2, naming it), unless told to.
    const std::string out = dir.file("out");
    r = test::run_cli({"repair", ckpt, "-o", out, "--reset-optimizer", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("unsafe-pickle") != std::string::npos &&
                 r.err.find("mp_rank_00_model_states.pt") != std::string::npos &&
                 r.err.find("--allow-unsafe-pickle") != std::string::npos,
             r.err.c_str());
    QVERIFY(!fs::exists(out));
    r = test::run_cli(
        {"repair", ckpt, "-o", out, "--reset-optimizer", "--device", "cpu", "--allow-unsafe-pickle"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(fs::exists(out + "/" + e.tag + "/mp_rank_00_model_states.pt"));
    // The copy still carries it, and says so.
    r = test::run_cli({"inspect", out, "--json"});
    QCOMPARE(unsafe(realds::parse(r.out)["problems"].toArray()).size(), size_t(1));
  }

  // Nothing real DeepSpeed writes is flagged, at any severity (v0.12.6 and v0.14.5, every kind of file).
  void realCheckpointsAreNotFlagged_data() {
    QTest::addColumn<QString>("name");
    for (const char* n :
         {"z1_fp16_dp2", "z1_bf16_dp3_fresh", "z1_fp16_dp4_edge", "z2_fp16_dp2", "z2_bf16_dp4", "z3_fp16_dp2",
          "z3_fp16_dp4_subgroups", "bf16opt_s0_dp3", "seed_z2_fp16_no_optim", "v145_z2_fp16_dp2",
          "v145_seed_z2_fp16_no_optim", "v145_z2_bf16_dp3"})
      QTest::newRow(n) << QString(n);
  }
  void realCheckpointsAreNotFlagged() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    const auto r = test::run_cli({"inspect", e.save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto found = unsafe(realds::parse(r.out)["problems"].toArray());
    QVERIFY2(found.empty(), found.empty() ? "" : qPrintable(found[0]["message"].toString()));
  }

  // A copy of a real checkpoint whose files claim dp_world_size and partition_count 2^31-1: refused with exit
  // 2 by every command, naming the file and the field (before the bound, inspect ran for minutes).
  void absurdCountsAreRefused() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z2_fp16_dp2");
    test::TempDir dir;
    const std::string ckpt = hostile_copy(e, dir, "huge-counts");
    for (const std::vector<std::string>& args : {std::vector<std::string>{"inspect", ckpt},
                                                 {"diagnose", ckpt, "--device", "cpu"},
                                                 {"export", ckpt, "-o", dir.file("w.safetensors")},
                                                 {"repair", ckpt, "-o", dir.file("o"), "--refresh-fp32"}}) {
      const auto r = test::run_cli(args);
      CKPTDOC_EXPECT_EXIT(r, 2);
      QVERIFY2(r.err.find("mp_rank_00_model_states.pt") != std::string::npos &&
                   r.err.find("dp_world_size") != std::string::npos &&
                   r.err.find("2147483647") != std::string::npos,
               r.err.c_str());
    }
    QVERIFY(!fs::exists(dir.file("w.safetensors")));
    QVERIFY(!fs::exists(dir.file("o")));
  }
};

CKPTDOC_TEST_MAIN(TestRealdsSafety)
#include "test_realds_safety.moc"
