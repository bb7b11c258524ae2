// repair --reset-optimizer and --drop-optimizer of legacy Megatron-LM checkpoints (#28): saves written by
// Megatron-LM 0.18.0's own save_checkpoint with ckpt_format "torch" (megatron_legacy_train.py; realds.py
// entries v019_megatron_legacy_*), non-distributed (optimizer state in model_optim_rng.pt) and distributed
// (distrib_optim.pt). The truth is Megatron-LM's own load_checkpoint of the input and of the output
// (megatron_legacy_load_check.py): torch Adam's state as megatron-core loaded it, each fp32 main's and each
// weight's sha256, and one optimizer step from there. main refused both repairs of a legacy folder by name.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <map>

#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/mapped_file.h"
#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kMcore = "0.18.0";

// Megatron-LM's own load of `save_dir` (entry e's layout), megatron_legacy_load_check.py's JSON; empty when
// the judge failed.
QJsonObject megatron_load(const realds::Entry& e, const std::string& save_dir, const test::TempDir& dir,
                          const std::string& name, const std::vector<std::string>& extra = {}) {
  const auto out = dir.file(name + ".json");
  std::vector<std::string> args{test::source_dir() + "/tests/realds/megatron_legacy_load_check.py",
                                "--ckpt",
                                save_dir,
                                "--tp",
                                std::to_string(e.tp),
                                "--pp",
                                std::to_string(e.pp),
                                "--json",
                                out};
  if (e.spec["optimizer"].toString() == "distributed")
    args.insert(args.end(), {"--optimizer", "distributed"});
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = realds::launch_with_megatron_core(args, e.world, kMcore, dir.file(name + "-logs"));
  if (r.exit_code != 0) {
    qWarning("%s", realds::describe(r).c_str());
    return {};
  }
  return realds::parse(test::read_text(out));
}

// The files of the iteration folder `iter` (relative names), each file's bytes.
std::map<std::string, std::string> files_of(const std::string& iter) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(iter))
    if (e.is_regular_file())
      out[std::filesystem::relative(e.path(), iter).string()] = test::read_text(e.path().string());
  return out;
}

// The zip records of `copy` whose bytes differ from `in`'s (same entries, same names, else a mismatch).
std::vector<std::string> records_changed(const std::string& in, const std::string& copy) {
  const ZipReader a(MappedFile::open(in));
  const ZipReader b(MappedFile::open(copy));
  std::vector<std::string> out;
  if (a.entries().size() != b.entries().size()) return {"<entries differ>"};
  for (size_t i = 0; i < a.entries().size(); ++i) {
    if (a.entries()[i].name != b.entries()[i].name) return {"<names differ>"};
    const auto x = a.data(a.entries()[i]);
    const auto y = b.data(b.entries()[i]);
    if (!std::equal(x.begin(), x.end(), y.begin(), y.end())) out.push_back(a.entries()[i].name);
  }
  return out;
}

}  // namespace

class TestRealdsMegatronLegacyOptimizer : public QObject {
  Q_OBJECT

 private slots:
  // --reset-optimizer writes a new folder in which only the Adam state's records changed (non-distributed:
  // each param's step, exp_avg and exp_avg_sq record of model_optim_rng.pt, 3 x 29 per file; distributed:
  // distrib_optim.pt's exp_avg and exp_avg_sq records and model_optim_rng.pt's data.pkl, its step floats),
  // the input untouched, and says what it reset. Megatron-LM's own resume of the copy holds torch Adam states
  // for as many params as the input's, every step 0 (the input's 2) and every moment element zero (the
  // input's not), each fp32 main the input's bytes; it then takes a step. ckptdoc's diagnosis of the copy is
  // clean. main refused it (exit 2).
  void resetZeroesTheMomentsAndKeepsTheMains_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<int>("moments");  // moment tensors zeroed
    QTest::addColumn<int>("steps");    // step values set to 0
    QTest::addColumn<QStringList>(
        "changed");  // "file:N": N records changed in all the rank folders' files of that name
    QTest::addColumn<QString>("said");
    QTest::newRow("tp1") << "v019_megatron_legacy_tp1" << 58 << 29 << QStringList{"model_optim_rng.pt:87"}
                         << "the Adam moments of 29 params zeroed (58 tensors, 13312 elements) and the step "
                            "2 -> 0 (29 step tensors). Kept: the 29 fp32 mains";
    QTest::newRow("tp2") << "v019_megatron_legacy_tp2" << 116 << 58 << QStringList{"model_optim_rng.pt:174"}
                         << "Reset the optimizer of 2 rank files: the Adam moments of 58 params";
    QTest::newRow("pp2") << "v019_megatron_legacy_pp2" << 58 << 29 << QStringList{"model_optim_rng.pt:87"}
                         << "Reset the optimizer of 2 rank files";
    QTest::newRow("distopt_dp2")
        << "v019_megatron_legacy_distopt_dp2" << 2 << 2
        << QStringList{"model_optim_rng.pt:1", "distrib_optim.pt:2"}
        << "distrib_optim.pt's exp_avg and exp_avg_sq zeroed (2 buffer tensors, 14848 "
           "elements) and the step 2 -> 0 in model_optim_rng.pt's 2 param groups";
  }

  void resetZeroesTheMomentsAndKeepsTheMains() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(int, moments);
    QFETCH(int, steps);
    QFETCH(QStringList, changed);
    QFETCH(QString, said);
    const auto e = realds::checkpoint(entry.toStdString());
    const auto iter = e.save_dir + "/iter_0000002";
    const auto before = files_of(iter);
    test::TempDir dir;
    const auto out = dir.file("reset");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find(said.toStdString()) != std::string::npos, r.out.c_str());
    QCOMPARE(files_of(iter), before);  // the input untouched
    const auto j =
        test::run_cli({"repair", e.save_dir, "-o", dir.file("reset-json"), "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(j, 0);
    const auto said_json = realds::parse(j.out);
    QCOMPARE(said_json["moments_zeroed"].toInt(), moments);
    QCOMPARE(said_json["steps_reset"].toInt(), steps);
    QCOMPARE(said_json["step_before"].toDouble(), 2.0);
    // Adam's two moments per param in a non-distributed save; distrib_optim.pt's flat buffers have no
    // per-param states to count (the JSON said 0 for them).
    const bool distributed = said_json["distrib_optim"].toBool();
    QCOMPARE(said_json.contains("adam_states"), !distributed);
    if (!distributed) QCOMPARE(said_json["adam_states"].toInt(), moments / 2);

    // Only the Adam state's records changed; every other file and record is the input's.
    const auto after = files_of(out + "/iter_0000002");
    QCOMPARE(after.size(), before.size());
    QCOMPARE(test::read_text(out + "/latest_checkpointed_iteration.txt"),
             test::read_text(e.save_dir + "/latest_checkpointed_iteration.txt"));
    std::map<std::string, int> diffs, want;  // file name -> records changed in all the rank folders
    for (const auto& [name, bytes] : before) {
      const auto diff = records_changed(iter + "/" + name, out + "/iter_0000002/" + name);
      diffs[std::filesystem::path(name).filename().string()] += static_cast<int>(diff.size());
      for (const auto& d : diff)
        QVERIFY2(d.find("/data/") != std::string::npos || d.find("/data.pkl") != std::string::npos,
                 d.c_str());
    }
    for (const auto& c : changed) want[c.section(':', 0, 0).toStdString()] = c.section(':', 1).toInt();
    QCOMPARE(diffs, want);
    const auto diagnosis = test::run_cli({"diagnose", out, "--json"});
    CKPTDOC_EXPECT_EXIT(diagnosis, 0);
    QVERIFY(realds::parse(diagnosis.out)["verdict"].toObject()["clean"].toBool());

    // Megatron-LM's own resume of the input, then of the copy (and a step from it).
    const auto in = megatron_load(e, e.save_dir, dir, "input");
    const auto copy = megatron_load(e, out, dir, "copy", {"--step"});
    QVERIFY(!in.isEmpty() && !copy.isEmpty());
    const auto in_adam = in["adam"].toObject();
    const auto adam = copy["adam"].toObject();
    QCOMPARE(in_adam["steps"].toArray(), QJsonArray{2.0});
    QVERIFY(in_adam["exp_avg_nonzero"].toInt() > 0 && in_adam["exp_avg_sq_nonzero"].toInt() > 0);
    QCOMPARE(adam["states"].toInt(), in_adam["states"].toInt());
    QCOMPARE(adam["steps"].toArray(), QJsonArray{0.0});
    QCOMPARE(adam["exp_avg_nonzero"].toInt(), 0);
    QCOMPARE(adam["exp_avg_sq_nonzero"].toInt(), 0);
    QVERIFY(!in["mains_sha"].toObject().isEmpty());
    QCOMPARE(copy["mains_sha"].toObject(), in["mains_sha"].toObject());
    QCOMPARE(copy["weights_sha"].toObject(), in["weights_sha"].toObject());
    QCOMPARE(copy["iteration"].toInt(), 2);
    QVERIFY(copy["step_ok"].toBool());
  }

  // --drop-optimizer writes what Megatron-LM saves under --no-save-optim: each model_optim_rng.pt without its
  // "optimizer" entry, no distrib_optim.pt, the tracker and everything else as it was, and says so.
  // Megatron-LM loads it with --no-load-optim: the iteration and every weight the input's (sha256 of each),
  // fresh Adam (no moment), and it takes a step. main refused it (exit 2).
  void dropLeavesTheOptimizerOut_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<int>("distrib_optim");  // distrib_optim.pt files left out
    QTest::newRow("tp2") << "v019_megatron_legacy_tp2" << 0;
    QTest::newRow("pp2") << "v019_megatron_legacy_pp2" << 0;
    QTest::newRow("distopt_dp2") << "v019_megatron_legacy_distopt_dp2" << 1;
  }

  void dropLeavesTheOptimizerOut() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(int, distrib_optim);
    const auto e = realds::checkpoint(entry.toStdString());
    const auto iter = e.save_dir + "/iter_0000002";
    const auto before = files_of(iter);
    test::TempDir dir;
    const auto out = dir.file("dropped");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--drop-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(files_of(iter), before);  // the input untouched
    const auto j = realds::parse(r.out);
    QCOMPARE(j["entries_dropped"].toArray(), QJsonArray{"optimizer"});
    QCOMPARE(j["distrib_optim_dropped"].toInt(), distrib_optim);
    QCOMPARE(j["rank_files"].toInt(), e.tp * e.pp);
    QVERIFY(j["bytes_after"].toInteger() < j["bytes_before"].toInteger());
    const auto after = files_of(out + "/iter_0000002");
    for (const auto& [name, bytes] : before)
      QVERIFY2(after.count(name) == (name.find("distrib_optim.pt") == std::string::npos ? 1U : 0U),
               name.c_str());
    QCOMPARE(test::read_text(out + "/latest_checkpointed_iteration.txt"),
             test::read_text(e.save_dir + "/latest_checkpointed_iteration.txt"));

    const auto in = megatron_load(e, e.save_dir, dir, "input");
    const auto copy = megatron_load(e, out, dir, "copy", {"--no-load-optim", "--step"});
    QVERIFY(!in.isEmpty() && !copy.isEmpty());
    QCOMPARE(copy["iteration"].toInt(), 2);
    QVERIFY(!in["weights_sha"].toObject().isEmpty());
    QCOMPARE(copy["weights_sha"].toObject(), in["weights_sha"].toObject());
    QVERIFY(copy["mains_differ"].toArray().isEmpty());  // reload_model_params: the mains are the weights
    QCOMPARE(copy["adam"].toObject()["exp_avg_nonzero"].toInt(), 0);
    QVERIFY(copy["step_ok"].toBool());
  }

  // What is refused, exit 2, naming the file and the reason, and nothing written: a reset of a save that
  // holds no Adam state yet (Megatron-LM's --finetune load saved before a step), a reset or a drop of a save
  // that holds no optimizer (the drop's own output, as --no-save-optim writes it), two actions at once.
  void refusalsNameTheReasonAndWriteNothing() {
    REALDS_REQUIRE_DS("0.19");
    const auto finetune = realds::checkpoint("v019_megatron_legacy_tp2_finetune");
    const auto tp2 = realds::checkpoint("v019_megatron_legacy_tp2");
    test::TempDir dir;
    const auto fresh = test::run_cli({"repair", finetune.save_dir, "-o", dir.file("a"), "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(fresh, 2);
    QVERIFY2(fresh.err.find("mp_rank_00/model_optim_rng.pt") != std::string::npos &&
                 fresh.err.find("holds no Adam state") != std::string::npos,
             fresh.err.c_str());
    QVERIFY(!std::filesystem::exists(dir.file("a")));

    const auto dropped = dir.file("dropped");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", tp2.save_dir, "-o", dropped, "--drop-optimizer"}), 0);
    const auto reset = test::run_cli({"repair", dropped, "-o", dir.file("b"), "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(reset, 2);
    QVERIFY2(reset.err.find("holds no optimizer (saved with --no-save-optim)") != std::string::npos,
             reset.err.c_str());
    const auto again = test::run_cli({"repair", dropped, "-o", dir.file("c"), "--drop-optimizer"});
    CKPTDOC_EXPECT_EXIT(again, 2);
    QVERIFY2(again.err.find("no rank file holds an optimizer") != std::string::npos, again.err.c_str());
    const auto both =
        test::run_cli({"repair", tp2.save_dir, "-o", dir.file("d"), "--reset-optimizer", "--drop-optimizer"});
    CKPTDOC_EXPECT_EXIT(both, 2);
    QVERIFY2(both.err.find("--reset-optimizer alone") != std::string::npos, both.err.c_str());
    for (const char* f : {"b", "c", "d"}) QVERIFY(!std::filesystem::exists(dir.file(f)));
  }
};

QTEST_GUILESS_MAIN(TestRealdsMegatronLegacyOptimizer)
#include "test_realds_megatron_legacy_optimizer.moc"
