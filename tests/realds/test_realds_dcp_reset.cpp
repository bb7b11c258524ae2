// repair --reset-optimizer of a PyTorch Distributed Checkpoint (#28), on tests/fixtures/dcp/fsdp2_ws2/: Tiny
// sharded by FSDP2 at world 2, 3 Adam steps, saved by torch's own dcp.save (make_fsdp2_dcp.py). The judge is
// torch itself (tests/realds/dcp_reset_check.py, judges' venv, world 2): the repaired folder loaded into the
// same FSDP2 model and Adam, one step, must give weights bit-identical to the same weights with a fresh Adam
// taking the same step. The same judge on the input must see a difference (it is not blind).
//
// Also the publish every DCP/Megatron repair ends with (sources/dcp/rewrite_records.h): it never replaces or
// deletes what it did not create, shown in-process on a real Megatron-core save (--refresh-fp32) and on the
// DCP folder (--reset-optimizer).
#include <unistd.h>

#include <QtTest>
#include <filesystem>
#include <map>

#include "ckptdoc/io/fault_injection.h"
#include "ckptdoc/sources/registry.h"
#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

std::string fixture() {
  return test::fixtures_dir() + "/dcp/fsdp2_ws2";
}

std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& f : fs::directory_iterator(dir))
    out[f.path().filename().string()] = test::read_text(f.path());
  return out;
}

// torch's verdict on `dir` (dcp_reset_check.py), or a failure and an empty object.
QJsonObject judge(const std::string& dir, const test::TempDir& tmp, const std::string& as) {
  const auto json = tmp.file(as + ".json");
  const auto r =
      realds::launch({test::source_dir() + "/tests/realds/dcp_reset_check.py", dir, "--json", json}, 2,
                     "0.19", tmp.file(as + "-logs"));
  if (r.exit_code != 0) {
    QTest::qFail(realds::describe(r).c_str(), __FILE__, __LINE__);
    return {};
  }
  return realds::parse(test::read_text(json));
}

// The registry's repair of `path`, in this process (so a test can act at a chosen moment of it).
sources::Outcome repair_in_process(const sources::RepairRequest& rq) {
  return sources::source_for(rq.path, sources::Command::Repair)->repair(rq);
}

// Megatron's --refresh-fp32 of its stale entry, or --reset-optimizer of the DCP fixture, into dir/out.
sources::RepairRequest request(const QString& kind, const test::TempDir& dir) {
  sources::RepairRequest rq;
  if (kind == "megatron") {
    rq.path = realds::checkpoint("v019_megatron_finetune_stale").save_dir;
    rq.refresh_fp32 = true;
  } else {
    rq.path = fixture();
    rq.reset_optimizer = true;
  }
  rq.output = dir.file("out");
  return rq;
}

}  // namespace

class TestRealdsDcpReset : public QObject {
  Q_OBJECT

 private slots:
  void resetOptimizerResumesAsAFreshAdam() {
    REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    const auto in = dir.file("in");
    test::copy_tree(fixture(), in);
    const auto before = files_of(in);
    const auto out = dir.file("reset");
    const auto r = test::run_cli({"repair", in, "-o", out, "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto j = realds::parse(r.out);
    QCOMPARE(j["params"].toInt(), 5);    // embed.weight, proj.weight/bias, head.weight/bias
    QCOMPARE(j["tensors"].toInt(), 15);  // exp_avg, exp_avg_sq and step of each
    QCOMPARE(files_of(in), before);      // the input untouched
    const auto after = files_of(out);
    QCOMPARE(after.size(), before.size());
    QVERIFY(after.at(".metadata") == before.at(".metadata"));  // every offset kept: .metadata is the input's
    for (const auto& [name, bytes] : before) QCOMPARE(after.at(name).size(), bytes.size());

    const auto input = judge(in, dir, "input");
    QVERIFY2(!input["identical"].toBool(),
             "the judge sees no difference on the input: it would pass anything");
    QCOMPARE(input["loaded_steps"].toArray(), (QJsonArray{3.0}));

    const auto reset = judge(out, dir, "reset");
    QVERIFY(reset["weights_loaded_alike"].toBool());
    QCOMPARE(reset["loaded_steps"].toArray(), (QJsonArray{0.0}));
    QCOMPARE(reset["loaded_nonzero_moment_elements"].toInt(), 0);
    QCOMPARE(reset["steps_after"].toArray(), (QJsonArray{1.0}));
    QCOMPARE(reset["fresh_steps_after"].toArray(), (QJsonArray{1.0}));
    QVERIFY2(reset["identical"].toBool(),
             ("max abs diff " + std::to_string(reset["max_abs_diff"].toDouble())).c_str());
  }

  // Why the step is set to 0, not 1: torch's own save of an Adam that never stepped
  // (fsdp2_ws2_fresh_optimizer: get_state_dict's _init_optim_state leaves step 1 with zero moments) does not
  // resume as a fresh Adam (its first step bias-corrects at step 2); the same folder after --reset-optimizer
  // does.
  void stepOneIsNotAFreshAdamStepZeroIs() {
    REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    const auto in = test::fixtures_dir() + "/dcp/fsdp2_ws2_fresh_optimizer";
    const auto saved = judge(in, dir, "saved");
    QCOMPARE(saved["loaded_steps"].toArray(), (QJsonArray{1.0}));
    QCOMPARE(saved["loaded_nonzero_moment_elements"].toInt(), 0);
    QVERIFY2(!saved["identical"].toBool(), "step 1 with zero moments resumed as a fresh Adam");
    const auto out = dir.file("reset");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out, "--reset-optimizer"}), 0);
    const auto reset = judge(out, dir, "reset");
    QCOMPARE(reset["loaded_steps"].toArray(), (QJsonArray{0.0}));
    QVERIFY2(reset["identical"].toBool(),
             ("max abs diff " + std::to_string(reset["max_abs_diff"].toDouble())).c_str());
  }

  // An Accelerate FSDP2 save_state folder (realds entry accelerate_fsdp2_ws2: GPT-2, 3 AdamW steps, world 2):
  // its optimizer_0/ reset, every other file copied; Accelerate's own load_state of the output and one step
  // equal the same weights with a fresh AdamW stepping (tests/realds/accelerate_reset_check.py).
  void resetOptimizerOfAnAccelerateFolder() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("accelerate_fsdp2_ws2");
    test::TempDir dir;
    const auto out = dir.file("reset");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto j = realds::parse(r.out);
    QCOMPARE(j["params"].toInt(), 28);  // GPT-2, 2 layers, tied lm_head: 28 optimizer params
    for (const char* f : {"scheduler.bin", "random_states_0.pkl", "random_states_1.pkl"})
      QVERIFY(test::read_text(out + "/" + f) == test::read_text(e.save_dir + "/" + f));
    QCOMPARE(files_of(out + "/pytorch_model_fsdp_0"), files_of(e.save_dir + "/pytorch_model_fsdp_0"));

    auto accelerate_judge = [&](const std::string& ckpt, const std::string& as) {
      const auto json = dir.file(as + ".json");
      const auto run = realds::launch(
          {test::source_dir() + "/tests/realds/accelerate_reset_check.py", ckpt, "--json", json}, 2, "0.19",
          dir.file(as + "-logs"));
      if (run.exit_code != 0) QTest::qFail(realds::describe(run).c_str(), __FILE__, __LINE__);
      return run.exit_code == 0 ? realds::parse(test::read_text(json)) : QJsonObject{};
    };
    const auto input = accelerate_judge(e.save_dir, "input");
    QVERIFY2(!input["identical"].toBool(),
             "the judge sees no difference on the input: it would pass anything");
    const auto reset = accelerate_judge(out, "reset");
    QCOMPARE(reset["loaded_steps"].toArray(), (QJsonArray{0.0}));
    QCOMPARE(reset["loaded_nonzero_moment_elements"].toInt(), 0);
    QCOMPARE(reset["steps_after"].toArray(), (QJsonArray{1.0}));
    QVERIFY2(reset["identical"].toBool(),
             ("max abs diff " + std::to_string(reset["max_abs_diff"].toDouble())).c_str());
  }

  // diagnose reads the reset folder as a fresh optimizer (step 0, zero moments): no moments-lost error.
  void diagnoseOfTheResetFolderIsClean() {
    test::TempDir dir;
    const auto out = dir.file("reset");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", fixture(), "-o", out, "--reset-optimizer"}), 0);
    const auto d = test::run_cli({"diagnose", out, "--json"});
    CKPTDOC_EXPECT_EXIT(d, 0);
    const auto report = realds::parse(d.out);
    QVERIFY2(report["problems"].toArray().isEmpty(), d.out.c_str());
    const auto steps = report["adam_steps"].toObject();
    QCOMPARE(steps.size(), 5);
    for (const auto& s : steps) QCOMPARE(s.toDouble(), 0.0);
    const auto verdict = report["verdict"].toObject()["text"].toString().toStdString();
    QVERIFY2(verdict.find("Adam step 0 for all 5 params") != std::string::npos, verdict.c_str());
  }

  // What diagnose names on fsdp2_ws2_moments_lost (moments lost at step 5, a negative exp_avg_sq: torch wrote
  // them, make_moments_lost_dcp.py) it offers --reset-optimizer for; the repaired folder diagnoses clean.
  void resetOptimizerFixesWhatDiagnoseNames() {
    const auto in = test::fixtures_dir() + "/dcp/fsdp2_ws2_moments_lost";
    const auto before = test::run_cli({"diagnose", in, "--json"});
    CKPTDOC_EXPECT_EXIT(before, 1);
    QStringList codes;
    for (const auto& p : realds::parse(before.out)["problems"].toArray()) {
      codes << p.toObject()["code"].toString();
      QVERIFY2(p.toObject()["message"].toString().contains("--reset-optimizer"), before.out.c_str());
    }
    codes.removeDuplicates();
    codes.sort();
    QCOMPARE(codes, (QStringList{"dcp-moments-lost", "dcp-moments-negative"}));
    test::TempDir dir;
    const auto out = dir.file("reset");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", out, "--reset-optimizer"}), 0);
    const auto after = test::run_cli({"diagnose", out, "--json"});
    CKPTDOC_EXPECT_EXIT(after, 0);
    QVERIFY2(realds::parse(after.out)["problems"].toArray().isEmpty(), after.out.c_str());
  }

  // A per-rank save (dcp.save(..., use_collectives=False): each rank writes its own copy of every step):
  // every copy is reset, else diagnose names the ranks' copies differing (dcp-replica-mismatch).
  void resetOptimizerOfAPerRankSaveResetsEveryCopy() {
    test::TempDir dir;
    const auto out = dir.file("reset");
    const auto r = test::run_cli({"repair", test::fixtures_dir() + "/dcp/fsdp2_ws2_per_rank", "-o", out,
                                  "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(realds::parse(r.out)["records"].toInt() > realds::parse(r.out)["tensors"].toInt(),
             r.out.c_str());
    const auto d = test::run_cli({"diagnose", out, "--json"});
    CKPTDOC_EXPECT_EXIT(d, 0);
    const auto report = realds::parse(d.out);
    QVERIFY2(report["problems"].toArray().isEmpty(), d.out.c_str());
    const auto steps = report["adam_steps"].toObject();
    QCOMPARE(steps.size(), 5);
    for (const auto& s : steps) QCOMPARE(s.toDouble(), 0.0);
  }

  // repair --drop-optimizer of the FSDP2 fixture: a new folder whose .metadata (written by ckptdoc's pickler)
  // and storage files hold the input's keys but the optimizer.* ones, the input untouched. The judge is torch
  // (tests/realds/dcp_drop_check.py, world 2): FileSystemReader reads the new .metadata, the model and
  // train_state loaded from it by their keys alone equal those loaded from the input bit for bit, a fresh
  // Adam steps both alike, and the full resume state (model + optimizer) no longer loads from it. The same
  // judge given the input as its "dropped" folder sees the optimizer still there (it is not blind). main
  // refused
  // --drop-optimizer of a DCP folder ("ckptdoc writes no such pickle").
  void dropOptimizerLoadsTheModelAlone() {
    REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    const auto in = dir.file("in");
    test::copy_tree(fixture(), in);
    const auto before = files_of(in);
    const auto out = dir.file("dropped");
    const auto r = test::run_cli({"repair", in, "-o", out, "--drop-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto j = realds::parse(r.out);
    QCOMPARE(j["keys_dropped"].toInt(), 70);  // 5 params: 3 state and 11 param-group keys each
    QCOMPARE(j["keys_kept"].toInt(), 7);      // 5 weights, train_state.step and .tag
    QVERIFY(j["storage_bytes_after"].toDouble() < j["storage_bytes_before"].toDouble());
    QCOMPARE(files_of(in), before);  // the input untouched

    auto drop_judge = [&](const std::string& dropped, const std::string& as) {
      const auto json = dir.file(as + ".json");
      const auto run = realds::launch(
          {test::source_dir() + "/tests/realds/dcp_drop_check.py", in, dropped, "--json", json}, 2, "0.19",
          dir.file(as + "-logs"));
      if (run.exit_code != 0) QTest::qFail(realds::describe(run).c_str(), __FILE__, __LINE__);
      return run.exit_code == 0 ? realds::parse(test::read_text(json)) : QJsonObject{};
    };
    const auto blind = drop_judge(in, "input");
    QVERIFY2(!blind["keys_out_are_input_without_optimizer"].toBool() && blind["full_load_dropped"].toBool(),
             "the judge sees no optimizer in the input: it would pass anything");
    const auto t = drop_judge(out, "dropped");
    QCOMPARE(t["keys_in"].toInt(), 77);
    QVERIFY(t["keys_out_are_input_without_optimizer"].toBool());
    QVERIFY(t["weights_identical"].toBool());
    QVERIFY(t["train_state_equal"].toBool());
    QVERIFY(t["fresh_step_identical"].toBool());
    QVERIFY(t["full_load_input"].toBool());
    QVERIFY(!t["full_load_dropped"].toBool());

    // An Accelerate folder's --drop-optimizer with another action is refused, writing nothing, for the reason
    // it is refused alone (test_realds_accelerate's dropOptimizerIsRefusedAsLoadStateNeedsIt).
    const auto e = realds::checkpoint("accelerate_fsdp2_ws2");
    const auto acc =
        test::run_cli({"repair", e.save_dir, "-o", dir.file("acc"), "--drop-optimizer", "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(acc, 2);
    QVERIFY2(acc.err.find("--drop-optimizer") != std::string::npos &&
                 acc.err.find("Accelerator.load_state") != std::string::npos,
             acc.err.c_str());
    QVERIFY(!fs::exists(dir.file("acc")));
  }

  // An empty folder made at OUT by someone else while the repair writes its copy is kept, and the repair says
  // so; fs::rename would have replaced it. The moment is chosen by the file-touch hook: when the copy is
  // re-opened for its check.
  void publishKeepsAnOutputMadeMeanwhile_data() {
    QTest::addColumn<QString>("kind");
    QTest::newRow("megatron --refresh-fp32") << "megatron";
    QTest::newRow("dcp --reset-optimizer") << "dcp";
  }
  void publishKeepsAnOutputMadeMeanwhile() {
    QFETCH(QString, kind);
    if (kind == "megatron") REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    sources::RepairRequest rq = request(kind, dir);
    bool made = false;
    set_file_touch_hook([&](const std::string& path) {
      if (!made && path.find(rq.output + ".ckptdoc-") == 0) made = fs::create_directory(rq.output);
    });
    bool refused = false;
    try {
      repair_in_process(rq);
    } catch (const Error& e) {
      refused = e.kind() == ErrorKind::OutputExists;
      if (!refused) qWarning("%s", e.what());
    }
    set_file_touch_hook({});
    QVERIFY(made);
    QVERIFY2(refused, "the repair published over a folder it did not create");
    QVERIFY(fs::is_directory(rq.output) && fs::is_empty(rq.output));
    for (const auto& e : fs::directory_iterator(dir.path()))  // nothing of the run left beside it
      QVERIFY2(e.path() == rq.output, e.path().c_str());
  }

  // A folder at the name this run would write its copy to was not made by it: never removed.
  void leftoverOfAnotherWriterIsNeverRemoved_data() { publishKeepsAnOutputMadeMeanwhile_data(); }
  void leftoverOfAnotherWriterIsNeverRemoved() {
    QFETCH(QString, kind);
    if (kind == "megatron") REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    sources::RepairRequest rq = request(kind, dir);
    const std::string pid = std::to_string(::getpid());
    for (const char* name : {".ckptdoc-tmp-", ".ckptdoc-partial-"}) {
      fs::create_directory(rq.output + name + pid);
      test::write_text(rq.output + name + pid + "/keep", "not ckptdoc's");
    }
    try {
      repair_in_process(rq);
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::OutputExists);
    }
    for (const char* name : {".ckptdoc-tmp-", ".ckptdoc-partial-"})
      QCOMPARE(test::read_text(rq.output + name + pid + "/keep"), std::string("not ckptdoc's"));
    QVERIFY(!fs::exists(rq.output));
  }
};

QTEST_GUILESS_MAIN(TestRealdsDcpReset)
#include "test_realds_dcp_reset.moc"
