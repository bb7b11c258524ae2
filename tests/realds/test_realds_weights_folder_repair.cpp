// `ckptdoc repair --reset-optimizer / --drop-optimizer` of weights folders that keep their optimizer beside
// the weights (sources/weights_folder/): a real Hugging Face Trainer checkpoint-N/ without DeepSpeed
// (hf_trainer_plain, optimizer.pt) and a real Accelerate plain save_state folder (optimizer.bin). Each output
// is loaded by the framework that wrote the input (weights_folder_optimizer_check.py, the judges' venv),
// which trains a step from it: the state it loaded is what the repair promised.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>
#include <vector>

#include "app_repair.h"
#include "ckptdoc/session/session.h"
#include "job_watching_io.h"
#include "realds_support.h"
#include "same_tree.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

std::string script(const std::string& name) {
  return test::source_dir() + "/tests/realds/" + name;
}

// weights_folder_optimizer_check.py on `dir`: the framework's load and one step; its JSON, or a failure.
QJsonObject framework_load(const std::string& framework, const std::string& dir, const test::TempDir& tmp,
                           const std::string& as) {
  const auto r =
      realds::python_with_deepspeed({script("weights_folder_optimizer_check.py"), framework, dir, "--json",
                                     tmp.file(as + ".json"), "--out", tmp.file(as + "-run")},
                                    "0.19");
  if (r.exit_code != 0) {
    QTest::qFail(realds::describe(r).c_str(), __FILE__, __LINE__);
    return {};
  }
  return realds::parse(test::read_text(tmp.file(as + ".json")));
}

QJsonArray steps(double s) {
  return QJsonArray{s};
}

// The files of `in` but `except`, byte for byte in `out`.
void same_files_but(const std::string& in, const std::string& out, const std::string& except) {
  for (const auto& name : test::files_in(in)) {
    if (name == except) continue;
    QVERIFY2(test::tree_difference(out + "/" + name, in + "/" + name).empty(), name.c_str());
  }
}

// Accelerate's save_state of a small plain (non-FSDP) run: model.safetensors, optimizer.bin, scheduler.bin,
// random_states_0.pkl (as test_realds_accelerate.cpp's plainSaveStateChecksItsOptimizer writes it).
std::string plain_save_state(const std::string& save) {
  const auto w = realds::python_with_deepspeed(
      {"-c",
       "import sys, torch\n"
       "from accelerate import Accelerator\n"
       "acc = Accelerator(cpu=True)\n"
       "m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))\n"
       "opt = torch.optim.AdamW(m.parameters(), lr=1e-3)\n"
       "sch = torch.optim.lr_scheduler.StepLR(opt, 10)\n"
       "m, opt, sch = acc.prepare(m, opt, sch)\n"
       "for _ in range(3):\n"
       "    acc.backward(m(torch.randn(8, 16)).pow(2).mean()); opt.step(); sch.step(); opt.zero_grad()\n"
       "acc.save_state(sys.argv[1])\n",
       save},
      "0.19");
  if (w.exit_code != 0) QTest::qFail(realds::describe(w).c_str(), __FILE__, __LINE__);
  return save;
}

}  // namespace

class TestRealdsWeightsFolderRepair : public QObject {
  Q_OBJECT

 private slots:
  // --reset-optimizer of a Trainer folder: optimizer.pt's moments and steps zeroed in a copy that loads with
  // torch.load(weights_only=True), every other file the input's. The Trainer resumes from it at step 4 with
  // 21 params of Adam state at step 0 and zero moments (the input: step 4, moments not zero), keeps the
  // scheduler it saved, and trains a step (Adam's step 1).
  void trainerResetResumesAsFreshAdam() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("hf_trainer_plain");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    const auto out = dir.file("reset");
    const auto r = realds::repair(in, out, {"--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("Reset the Adam state of 21 params in optimizer.pt") != std::string::npos,
             r.out.c_str());
    QVERIFY2(r.out.find("the step from 4 to 0") != std::string::npos, r.out.c_str());
    QVERIFY2(test::tree_difference(in, e.save_dir).empty(), "the input was written");
    same_files_but(in, out, "optimizer.pt");
    QCOMPARE(test::files_in(out), test::files_in(in));
    const auto safe = realds::python_with_deepspeed(
        {"-c",
         "import sys, torch\nsd = torch.load(sys.argv[1], weights_only=True)\nprint(len(sd['state']))\n",
         out + "/optimizer.pt"},
        "0.19");
    QVERIFY2(safe.exit_code == 0 && safe.out.find("21") != std::string::npos, realds::describe(safe).c_str());

    const auto original = framework_load("trainer", in, dir, "original");
    QCOMPARE(original["loaded"].toObject()["steps"].toArray(), steps(4));
    QVERIFY(original["loaded"].toObject()["nonzero_moments"].toInt() > 0);

    const auto reset = framework_load("trainer", out, dir, "reset");
    const auto loaded = reset["loaded"].toObject();
    QCOMPARE(loaded["params_with_state"].toInt(), 21);
    QCOMPARE(loaded["steps"].toArray(), steps(0));
    QCOMPARE(loaded["nonzero_moments"].toInt(), 0);
    QCOMPARE(reset["global_step"].toInt(), 4);
    QCOMPARE(reset["scheduler_steps"].toInt(), 4);
    QCOMPARE(reset["after"].toObject()["steps"].toArray(), steps(1));

    // --json: what was reset, as the other sources' repairs say it.
    const auto j = test::run_cli({"repair", in, "-o", dir.file("reset-json"), "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(j, 0);
    const auto o = realds::parse(j.out);
    QCOMPARE(o["action"].toString(), QString("reset-optimizer"));
    QCOMPARE(o["params"].toInt(), 21);
    QCOMPARE(o["step_before"].toDouble(), 4.0);
    QVERIFY(o["verified"].toBool());
    // Never over what is there.
    const auto again = test::run_cli({"repair", in, "-o", out, "--reset-optimizer"});
    QCOMPARE(again.exit_code, 2);
  }

  // The apps' --reset-optimizer of a Trainer folder (Session::repair_source, what both views' Repair runs for
  // it; the catalog reads the folder, its repair is the source's): the copy counts the folder's bytes;
  // cancelled at the copy's second write it publishes nothing and leaves no partial folder, the input as it
  // was; uncancelled, it writes what `ckptdoc repair --reset-optimizer` writes, file for file, byte for byte,
  // and says what the CLI says. (Before, the session kept no source for a folder the catalog reads.)
  void appResetOfTrainerFolderIsTheCli() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("hf_trainer_plain");
    test::TempDir src, dir;
    const auto in = realds::copy_of(e, src);
    uint64_t folder = 0;
    for (const auto& name : test::files_in(in)) folder += fs::file_size(fs::path(in) / name);
    sources::RepairRequest request;
    request.reset_optimizer = true;
    request.output = dir.file("cancelled");
    test::JobWatchingIo cut(/*cancel_at=*/2, "copying");
    const auto cancelled = test::app_repair(in, request, cut);
    QVERIFY2(cancelled, "the folder did not open as a source that repairs itself");
    QVERIFY2(cancelled->error, "the repair was published despite the cancel");
    QCOMPARE(std::string(session::error_kind_name(cancelled->error->kind)), std::string("cancelled"));
    std::vector<test::JobWatchingIo::Sample> copying;
    for (const auto& sample : cut.samples())
      if (sample.stage.rfind("copying", 0) == 0) copying.push_back(sample);
    QCOMPARE(copying.size(), size_t{2});
    QCOMPARE(copying[1].total, folder);
    QVERIFY(copying[1].done > 0 && copying[1].done < folder);
    QVERIFY(test::files_in(dir.path()).empty());  // no output, no partial folder
    QVERIFY2(test::tree_difference(in, e.save_dir).empty(), "the input was written");

    request.output = dir.file("app");
    test::JobWatchingIo watched;
    const auto done = test::app_repair(in, request, watched);
    QVERIFY(done);
    QVERIFY2(done->ok(), done->error ? done->error->message.c_str() : "");
    const auto cli = test::run_cli({"repair", in, "-o", dir.file("cli"), "--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(cli, 0);
    test::expect_same_tree(dir.file("app"), dir.file("cli"));
    auto said = done->value->text;  // the CLI's words, but for the output folder it names
    const size_t at = said.find("Wrote " + dir.file("app") + "\n");
    QVERIFY2(at != std::string::npos, said.c_str());
    said.replace(at + 6, dir.file("app").size(), dir.file("cli"));
    QCOMPARE(said, cli.out);
    QVERIFY2(test::tree_difference(in, e.save_dir).empty(), "the input was written");
  }

  // --drop-optimizer of a Trainer folder: the copy without optimizer.pt. The Trainer resumes from it at step
  // 4 with a fresh optimizer (no state until its first step) and a fresh scheduler (it loads scheduler.pt
  // only beside an optimizer file), and trains a step.
  void trainerDropResumesWithFreshOptimizer() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("hf_trainer_plain");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    const auto out = dir.file("dropped");
    const auto r = test::run_cli({"repair", in, "-o", out, "--drop-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto o = realds::parse(r.out);
    QCOMPARE(o["action"].toString(), QString("drop-optimizer"));
    QCOMPARE(o["files_dropped"].toArray(), QJsonArray{"optimizer.pt"});
    QCOMPARE(o["bytes_dropped"].toInteger(), qint64(fs::file_size(in + "/optimizer.pt")));
    QVERIFY(!fs::exists(out + "/optimizer.pt") && fs::exists(out + "/scheduler.pt"));
    same_files_but(in, out, "optimizer.pt");
    QVERIFY(fs::exists(in + "/optimizer.pt"));

    const auto dropped = framework_load("trainer", out, dir, "dropped");
    QCOMPARE(dropped["loaded"].toObject()["params_with_state"].toInt(), 0);
    QCOMPARE(dropped["global_step"].toInt(), 4);
    QCOMPARE(dropped["scheduler_steps"].toInt(), 0);
    QCOMPARE(dropped["after"].toObject()["params_with_state"].toInt(), 21);
    QCOMPARE(dropped["after"].toObject()["steps"].toArray(), steps(1));
  }

  // --reset-optimizer of an Accelerate save_state folder: optimizer.bin reset; Accelerator.load_state loads
  // 4 params of Adam state at step 0 with zero moments (the input: step 3), the scheduler as saved, and
  // steps.
  void accelerateResetLoadsAsFreshAdam() {
    REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    const std::string in = plain_save_state(dir.file("save"));
    const auto out = dir.file("reset");
    const auto r = realds::repair(in, out, {"--reset-optimizer"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("Reset the Adam state of 4 params in optimizer.bin") != std::string::npos,
             r.out.c_str());
    same_files_but(in, out, "optimizer.bin");

    const auto original = framework_load("accelerate", in, dir, "original");
    QCOMPARE(original["loaded"].toObject()["steps"].toArray(), steps(3));
    const auto reset = framework_load("accelerate", out, dir, "reset");
    QCOMPARE(reset["loaded"].toObject()["params_with_state"].toInt(), 4);
    QCOMPARE(reset["loaded"].toObject()["steps"].toArray(), steps(0));
    QCOMPARE(reset["loaded"].toObject()["nonzero_moments"].toInt(), 0);
    QCOMPARE(reset["scheduler_steps"].toInt(), 3);
    QCOMPARE(reset["after"].toObject()["steps"].toArray(), steps(1));
  }

  // --reset-optimizer of an Accelerate FSDP2 FULL_STATE_DICT save_state (realds entry
  // accelerate_fsdp2_full_ws2: pytorch_model_fsdp.bin and optimizer.bin keyed by FQN, GPT-2, 3 AdamW steps,
  // world 2): Accelerate's own load_state of the output at world 2 and one step equal the same weights with a
  // fresh AdamW stepping (accelerate_full_reset_check.py); from the input they differ.
  void accelerateFullStateDictResetLoadsAsFreshAdam() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("accelerate_fsdp2_full_ws2");
    test::TempDir dir;
    const auto out = dir.file("reset");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(realds::parse(r.out)["params"].toInt(), 28);
    same_files_but(e.save_dir, out, "optimizer.bin");
    auto judge = [&](const std::string& ckpt, const std::string& as) {
      const auto json = dir.file(as + ".json");
      const auto run = realds::launch({script("accelerate_full_reset_check.py"), ckpt, "--json", json}, 2,
                                      "0.19", dir.file(as + "-logs"));
      if (run.exit_code != 0) QTest::qFail(realds::describe(run).c_str(), __FILE__, __LINE__);
      return run.exit_code == 0 ? realds::parse(test::read_text(json)) : QJsonObject{};
    };
    const auto input = judge(e.save_dir, "input");
    QCOMPARE(input["loaded_steps"].toArray(), steps(3));
    QVERIFY2(!input["identical"].toBool(),
             "the judge sees no difference on the input: it would pass anything");
    const auto reset = judge(out, "reset");
    QCOMPARE(reset["loaded_steps"].toArray(), steps(0));
    QCOMPARE(reset["loaded_nonzero_moment_elements"].toInt(), 0);
    QCOMPARE(reset["steps_after"].toArray(), steps(1));
    QVERIFY2(reset["identical"].toBool(),
             ("max abs diff " + std::to_string(reset["max_abs_diff"].toDouble())).c_str());
  }

  // --drop-optimizer of an Accelerate folder is refused, naming why: load_state loads optimizer.bin for every
  // prepared optimizer, and real Accelerate fails on the folder without it. Nothing is written.
  void accelerateDropIsRefused() {
    REALDS_REQUIRE_DS("0.19");
    test::TempDir dir;
    const std::string in = plain_save_state(dir.file("save"));
    const auto out = dir.file("dropped");
    const auto r = test::run_cli({"repair", in, "-o", out, "--drop-optimizer"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.find("optimizer.bin") != std::string::npos &&
                 r.err.find("load_state") != std::string::npos &&
                 r.err.find("--reset-optimizer") != std::string::npos,
             r.err.c_str());
    QVERIFY(!fs::exists(out));
    // Why: Accelerate's own load_state on the folder without optimizer.bin.
    fs::copy(in, dir.file("without"));
    fs::remove(dir.file("without") + "/optimizer.bin");
    const auto load =
        realds::python_with_deepspeed({script("weights_folder_optimizer_check.py"), "accelerate",
                                       dir.file("without"), "--json", dir.file("without.json")},
                                      "0.19");
    QVERIFY2(load.exit_code != 0 && (load.out + load.err).find("optimizer.bin") != std::string::npos,
             realds::describe(load).c_str());
  }
};

QTEST_GUILESS_MAIN(TestRealdsWeightsFolderRepair)
#include "test_realds_weights_folder_repair.moc"
