// Universal checkpoints judged by real DeepSpeed (v0.12.6 and v0.14.5): `ckptdoc convert --to universal`
// writes the files DeepSpeed's own ds_to_universal.py writes where that script runs, every output loads with
// "load_universal" at dp 1-4 and trains a step with the source's fp32 masters, moments and Adam step (as
// DeepSpeed consolidates them from the source), `--to zero` writes what `repair --repartition` writes, and
// inspect, diagnose and export read universal folders, naming damage.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <map>
#include <set>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

using realds::describe;
using realds::parse;

// `ckptdoc convert SRC -o OUT --to ... --json`; the JSON report (exit 0 required).
QJsonObject convert(const std::string& src, const std::string& out, std::vector<std::string> extra) {
  std::vector<std::string> args{"convert", src, "-o", out, "--json", "--device", "cpu"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = test::run_cli(args);
  if (r.exit_code != 0) throw std::runtime_error("ckptdoc convert failed: " + describe(r));
  return parse(r.out);
}

// DeepSpeed's ds_to_universal.py of version `ds` on a matrix entry's tag folder, into `out_tag_dir`.
test::RunResult ds_to_universal(const realds::Entry& e, const std::string& out_tag_dir, const std::string& ds,
                                bool inject = false) {
  std::vector<std::string> args{"-m",
                                "deepspeed.checkpoint.ds_to_universal",
                                "--input_folder",
                                e.tag_dir(),
                                "--output_folder",
                                out_tag_dir,
                                "--num_extract_workers",
                                "1",
                                "--num_merge_workers",
                                "1"};
  if (inject) args.push_back("--inject_missing_state");
  return realds::python_with_deepspeed(args, ds);
}

std::string unequal(const QJsonObject& c) {
  return QJsonDocument(c).toJson(QJsonDocument::Compact).left(4000).toStdString();
}

// The Adam step DeepSpeed itself reports after loading the source (the reference load of realds.py ref).
double source_adam_step(const std::string& name) {
  const auto ref = fs::path(realds::reference(name, "fp32")).parent_path() / "input_load.json";
  const auto j = parse(test::read_text(ref.string()));
  const auto steps = j["after_load_summary"].toObject()["adam_step_per_group"].toArray();
  if (steps.isEmpty()) throw std::runtime_error("no Adam step in " + ref.string());
  return steps.first().toArray().at(1).toDouble();
}

std::set<double> loaded_steps(const realds::LoadCheck& c) {
  std::set<double> s;
  for (const auto& g : c.report["after_load_summary"].toObject()["adam_step_per_group"].toArray())
    s.insert(g.toArray().at(1).toDouble());
  return s;
}

// Real engine.load_checkpoint of `save_dir`, configured like `like`, at `world` ranks with DeepSpeed `ds`:
// fp32 masters and moments equal to what DeepSpeed consolidates from the source, the Adam step the source
// had.
realds::LoadCheck load_universal(const std::string& save_dir, const std::string& like, int world,
                                 const std::string& ds = "", bool universal = true) {
  // --timeout: DeepSpeed's ranks share the CPU with whatever else runs (ctest -j, other builds)
  std::vector<std::string> args = {"--strict",
                                   "--timeout",
                                   "900",
                                   "--expect-fp32",
                                   realds::reference(like, "fp32"),
                                   "--expect-moments",
                                   realds::reference(like, "moments")};
  if (universal) args.push_back("--universal");
  return realds::load(save_dir, like, args, world, ds);
}

std::vector<std::string> finding_codes(const QJsonObject& report, const char* severity) {
  std::vector<std::string> out;
  for (const auto& f : report["findings"].toArray())
    if (f.toObject()["severity"].toString() == severity)
      out.push_back(f.toObject()["code"].toString().toStdString());
  return out;
}

}  // namespace

class TestRealdsUniversal : public QObject {
  Q_OBJECT

  // Converted from `name` (--to universal, default target), then loaded at dp 1-4 by `ds` (default: the
  // entry's), each load strict against the source's consolidated fp32 and moments and at its Adam step.
  void loads_at_every_world_size(const std::string& name, std::vector<int> worlds = {1, 2, 3, 4},
                                 const std::string& ds = "", std::vector<std::string> convert_args = {}) {
    const auto e = realds::checkpoint(name);
    test::TempDir dir;
    const std::string out = dir.file("universal");
    std::vector<std::string> args{"--to", "universal"};
    args.insert(args.end(), convert_args.begin(), convert_args.end());
    const auto report = convert(e.save_dir, out, args);
    QVERIFY2(report["ok"].toBool(), unequal(report).c_str());
    const double step = source_adam_step(name);
    for (int world : worlds) {
      const auto c = load_universal(out, name, world, ds);
      REALDS_EXPECT_STRICT(c);
      QVERIFY2(loaded_steps(c) == std::set<double>{step},
               ("dp " + std::to_string(world) + ": Adam step after load is not the source's " +
                std::to_string(step) + "\n" + c.describe())
                   .c_str());
    }
  }

 private slots:
  // ds_to_universal.py's own output, where it runs: the same files, equal tensors and values.
  void filesEqualDsToUniversal_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("inject");
    QTest::addColumn<bool>("iteration_added");
    // universal_checkpoint_info and iteration as Megatron saves them (0.12.6; groups without padding).
    QTest::newRow("0.12.6 ZeRO-2 fp16, Megatron-style client state") << "uci_z2_fp16_dp2" << false << false;
    // universal_checkpoint_info without iteration: 0.12.6's loader needs one, ckptdoc adds it.
    QTest::newRow("0.12.6 BF16_Optimizer, no iteration") << "uci_bf16opt_s1_dp2" << false << true;
    QTest::newRow("0.14.5 ZeRO-1 bf16, universal_checkpoint_info")
        << "v145_uci_z1_bf16_dp2" << false << false;
    // A plain checkpoint: 0.14.5's --inject_missing_state.
    QTest::newRow("0.14.5 ZeRO-2 fp16, plain") << "v145_z2_fp16_dp2" << true << true;
  }
  void filesEqualDsToUniversal() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(bool, inject);
    QFETCH(bool, iteration_added);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const std::string theirs = dir.file("theirs/" + e.tag + "_universal");
    fs::create_directories(fs::path(theirs).parent_path());
    const auto d = ds_to_universal(e, theirs, e.ds, inject);
    QVERIFY2(d.exit_code == 0, describe(d).c_str());
    const auto report = convert(e.save_dir, dir.file("ours"), {"--to", "universal"});
    QVERIFY2(report["ok"].toBool(), unequal(report).c_str());
    QCOMPARE(test::read_text(dir.file("ours/latest_universal")), e.tag + "_universal");
    // ckptdoc says what it assumed exactly when the checkpoint has no universal_checkpoint_info.
    QCOMPARE(!report["assumptions"].toArray().isEmpty(), inject || iteration_added);
    std::vector<std::string> allowed;
    if (iteration_added) allowed.push_back("mp_rank_00_model_states.pt:iteration");
    const auto c = realds::compare_universal_folders(theirs, dir.file("ours/" + e.tag + "_universal"), e.ds,
                                                     allowed, dir);
    QVERIFY2(c["ok"].toBool(), unequal(c).c_str());
    QVERIFY(c["compared"].toInt() >= 8 * 3 + 2);
    int extra = 0;
    for (const auto& f : c["files"].toArray()) extra += f.toObject()["extra_keys_ours"].toArray().size();
    QCOMPARE(extra, iteration_added ? 1 : 0);
  }

  // The facts behind convert: 0.12.6's converter refuses plain checkpoints, and its output from a checkpoint
  // without `iteration` does not load in 0.12.6; ckptdoc's output of the same checkpoint does.
  void deepSpeed0126NeedsWhatCkptdocWrites() {
    REALDS_REQUIRE();
    const auto plain = realds::checkpoint("z2_fp16_dp2");
    test::TempDir dir;
    const auto refused = ds_to_universal(plain, dir.file("refused/out"), "0.12.6");
    QVERIFY2(refused.exit_code != 0 &&
                 (refused.out + refused.err).find("universal_checkpoint_info") != std::string::npos,
             describe(refused).c_str());
    const auto e = realds::checkpoint("uci_bf16opt_s1_dp2");
    const std::string theirs = dir.file("theirs/" + e.tag + "_universal");
    fs::create_directories(fs::path(theirs).parent_path());
    QVERIFY(ds_to_universal(e, theirs, "0.12.6").exit_code == 0);
    const auto failed = load_universal(dir.file("theirs"), e.name, 2);
    QVERIFY2(!failed.verdict()["load_ok"].toBool(), failed.describe().c_str());
    QVERIFY2(
        failed.report["load"].toObject()["first_exception"].toObject()["exception_text"].toString().contains(
            "iteration"),
        failed.describe().c_str());
    convert(e.save_dir, dir.file("ours"), {"--to", "universal"});
    const auto c = load_universal(dir.file("ours"), e.name, 2);
    REALDS_EXPECT_STRICT(c);
  }

  // v0.12.6's converter also fails on checkpoints that do carry universal_checkpoint_info, when torch's Adam
  // meets a group with alignment padding (it narrows every state tensor, the 0-dim step too); ckptdoc
  // converts them.
  void dsToUniversalFailsOnPaddedGroups() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("uci_z2_bf16_dp2_padded");
    test::TempDir dir;
    const auto d = ds_to_universal(e, dir.file("theirs/" + e.tag + "_universal"), "0.12.6");
    QVERIFY2(d.exit_code != 0 &&
                 (d.out + d.err).find("narrow() cannot be applied to a 0-dim tensor") != std::string::npos,
             describe(d).c_str());
    loads_at_every_world_size(e.name, {3});
  }

  void loadsZero2Fp16AtDp1To4() {
    REALDS_REQUIRE();
    loads_at_every_world_size("z2_fp16_dp2");
  }
  void loadsBf16OptimizerAtDp1To4() {
    REALDS_REQUIRE();
    loads_at_every_world_size("bf16opt_s1_dp2");
  }
  void loadsMegatronStyleAtDp1To4() {
    REALDS_REQUIRE();
    loads_at_every_world_size("uci_z2_fp16_dp2");
  }
  void loadsZero1AtDp1And3() {
    REALDS_REQUIRE();
    loads_at_every_world_size("z1_fp16_dp2", {1, 3});
  }
  void loadsV145AtDp1To4() {
    REALDS_REQUIRE();
    loads_at_every_world_size("v145_z2_fp16_dp2");
  }
  // The same output (0.14.5 layout plus `iteration`) with 0.12.6's loader.
  void loadsV145WithTheV0126LoaderToo() {
    REALDS_REQUIRE();
    loads_at_every_world_size("v145_z2_fp16_dp2", {2, 3}, "0.12.6");
  }
  void loadsV145Bf16AtDp1And4() {
    REALDS_REQUIRE();
    loads_at_every_world_size("v145_z2_bf16_dp3", {1, 4});
  }
  // A plain 0.12.6 checkpoint's output carries what both loader generations read: 0.14.5 loads it too.
  void plainOutputLoadsWithV145Too() {
    REALDS_REQUIRE();
    loads_at_every_world_size("z2_bf16_dp2", {3}, "0.14.5");
  }
  // With universal_checkpoint_info the layout follows --for-deepspeed: 0.14.5's (step.pt, param_groups) from
  // a 0.12.6 checkpoint, loaded by 0.14.5.
  void forDeepSpeedPicksTheLayout() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("uci_z2_fp16_dp2");
    test::TempDir dir;
    convert(e.save_dir, dir.file("own"), {"--to", "universal"});
    const auto r = test::run_cli({"inspect", dir.file("own"), "--json"});
    QVERIFY(!parse(r.out)["universal"]
                 .toObject()["has_step_files"]
                 .toBool());  // 0.12.6's layout, as its converter
    loads_at_every_world_size(e.name, {3}, "0.14.5", {"--for-deepspeed", "0.14.5"});
  }

  // Back to rigid files: tensors equal `repair --repartition`'s from the original, and DeepSpeed loads them.
  void backToZeroEqualsRepartition_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("template_needed");
    // 0.12.6's layout (with universal_checkpoint_info) keeps no hyper-parameters: they come from --target.
    QTest::newRow("0.12.6 ZeRO-2 fp16, Megatron-style (--target)") << "uci_z2_fp16_dp2" << true;
    QTest::newRow("0.12.6 BF16_Optimizer (--target)") << "uci_bf16opt_s1_dp2" << true;
    // Plain checkpoints' outputs carry param_groups.
    QTest::newRow("0.12.6 ZeRO-2 fp16, plain") << "z2_fp16_dp2" << false;
    QTest::newRow("0.14.5 ZeRO-2 fp16, plain") << "v145_z2_fp16_dp2" << false;
  }
  void backToZeroEqualsRepartition() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(bool, template_needed);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    convert(e.save_dir, dir.file("universal"), {"--to", "universal"});
    // Without a template, a universal folder that keeps no hyper-parameters is refused, nothing written.
    const auto bare = test::run_cli(
        {"convert", dir.file("universal"), "-o", dir.file("bare"), "--to", "zero", "--world-size", "3"});
    if (template_needed) {
      QVERIFY2(bare.exit_code == 2 && bare.err.find("hyper-parameters") != std::string::npos,
               describe(bare).c_str());
      QVERIFY(!fs::exists(dir.file("bare")));
    } else {
      QVERIFY2(bare.exit_code == 0, describe(bare).c_str());
    }
    std::vector<std::string> args{"--to", "zero", "--world-size", "3"};
    if (template_needed) args.insert(args.end(), {"--target", e.save_dir});
    const auto report = convert(dir.file("universal"), dir.file("zero"), args);
    QVERIFY2(report["ok"].toBool(), unequal(report).c_str());
    const auto rep = test::run_cli(
        {"repair", e.save_dir, "-o", dir.file("repartitioned"), "--repartition", "--world-size", "3"});
    QVERIFY2(rep.exit_code == 0, describe(rep).c_str());
    const auto c =
        realds::compare_universal_folders(dir.file("repartitioned/" + e.tag), dir.file("zero/" + e.tag), e.ds,
                                          {"mp_rank_00_model_states.pt:iteration"}, dir);
    QVERIFY2(c["ok"].toBool(), unequal(c).c_str());
    const auto load = load_universal(dir.file("zero"), e.name, 3, "", /*universal=*/false);
    REALDS_EXPECT_STRICT(load);
    QVERIFY2(loaded_steps(load) == std::set<double>{source_adam_step(e.name)}, load.describe().c_str());
  }

  // inspect, diagnose and export read universal folders, DeepSpeed's and ckptdoc's alike.
  void readsUniversalFolders() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("uci_z2_fp16_dp2");
    test::TempDir dir;
    const std::string theirs = dir.file("theirs/" + e.tag + "_universal");
    fs::create_directories(fs::path(theirs).parent_path());
    QVERIFY(ds_to_universal(e, theirs, e.ds).exit_code == 0);
    convert(e.save_dir, dir.file("ours"), {"--to", "universal"});
    // DeepSpeed's zero_to_fp32.py (the copy save_checkpoint put beside the tag) on the source; -P keeps its
    // own folder, whose logging.py/types.py shadow the standard library's, off sys.path.
    const std::string zero_to_fp32 = dir.file("zero_to_fp32.bin");
    const auto z = realds::python_with_deepspeed(
        {"-P", e.save_dir + "/zero_to_fp32.py", e.save_dir, zero_to_fp32}, e.ds);
    QVERIFY2(z.exit_code == 0, describe(z).c_str());
    for (const std::string& path : {dir.file("theirs"), theirs, dir.file("ours")}) {
      const auto ins = test::run_cli({"inspect", path, "--json"});
      QVERIFY2(ins.exit_code == 0, describe(ins).c_str());
      const auto cat = parse(ins.out);
      QCOMPARE(cat["kind"].toString(), QString("deepspeed-universal"));
      const auto params = cat["universal"].toObject()["params"].toArray();
      QCOMPARE(params.size(), 8);
      for (const auto& p : params)
        QCOMPARE(p.toObject()["states"].toArray(), (QJsonArray{"exp_avg", "exp_avg_sq", "fp32"}));
      const auto dg = test::run_cli({"diagnose", path, "--json", "--device", "cpu"});
      QVERIFY2(dg.exit_code == 0, describe(dg).c_str());
      const auto report = parse(dg.out);
      QVERIFY2(finding_codes(report, "error").empty() && finding_codes(report, "warning").empty(),
               dg.out.substr(0, 3000).c_str());
      int compared = 0;
      for (const auto& p : report["params"].toArray())
        compared += p.toObject()["lp_vs_fp32"].isObject() ? 1 : 0;
      QCOMPARE(compared, 8);  // every fp32 master against its 16-bit weight
      // export: what zero_to_fp32.py makes of the source, bit for bit.
      const std::string out = dir.file("export.bin");
      fs::remove(out);
      const auto ex = test::run_cli({"export", path, "-o", out, "--format", "torch"});
      QVERIFY2(ex.exit_code == 0, describe(ex).c_str());
      const auto cmp = test::run_python(test::script("fixtures/compare_state_dicts.py"), {out, zero_to_fp32});
      QVERIFY2(cmp.exit_code == 0, describe(cmp).c_str());
    }
  }

  // A layer grafted into a trained job has zero moments while the rest of its optimizer group trained. In a
  // universal folder every param is its own flat group, so the diagnosis must weigh it against its optimizer
  // group, as on the source: the graft warning, not "moments lost". The folder loads as model B at dp 3 with
  // the grafted masters.
  void graftedLayerDiagnosesAsOnItsSource() {
    REALDS_REQUIRE();
    const auto a = realds::checkpoint("z2_fp16_dp2");
    const auto b = realds::checkpoint("z2_fp16_dp2_modelB_fresh");
    test::TempDir dir;
    const auto grafted = dir.file("grafted"), universal = dir.file("universal");
    CKPTDOC_EXPECT_EXIT(realds::repair(a.save_dir, grafted, {"--repartition", "--target", b.save_dir}), 0);
    QVERIFY(convert(grafted, universal, {"--to", "universal"})["ok"].toBool());
    std::map<std::string, std::vector<std::string>> codes;  // folder -> its warnings
    for (const auto& [path, tag] : {std::pair{grafted, "source"}, std::pair{universal, "universal"}}) {
      const auto dg = test::run_cli({"diagnose", path, "--json", "--device", "cpu"});
      QVERIFY2(dg.exit_code == 0, describe(dg).c_str());  // 0: warnings at most
      const auto report = parse(dg.out);
      QVERIFY2(finding_codes(report, "error").empty(),
               (std::string(tag) + ": " + dg.out.substr(0, 3000)).c_str());
      codes[tag] = finding_codes(report, "warning");
    }
    QCOMPARE(codes["source"], std::vector<std::string>{"new-params-zero-moments"});
    QCOMPARE(codes["universal"], codes["source"]);
    // A's masters for every param A has, B's initial masters for the new layer (what the graft wrote).
    const auto fp32 = dir.file("grafted_fp32.pt");
    const auto merged = test::run(
        test::python(), {"-c",
                         "import sys, torch\n"
                         "a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])\n"
                         "torch.save({k: (a[k] if k in a else v) for k, v in b.items()}, sys.argv[3])\n",
                         realds::reference(a.name, "fp32"), realds::reference(b.name, "fp32"), fp32});
    QVERIFY2(merged.exit_code == 0, describe(merged).c_str());
    const auto c = realds::load(universal, b.name, {"--strict", "--universal", "--expect-fp32", fp32}, 3);
    REALDS_EXPECT_STRICT(c);
  }

  // Damage in a universal folder is named, and what DeepSpeed would make of it agrees.
  void damageIsNamed_data() {
    QTest::addColumn<QString>("action");
    QTest::addColumn<QString>("param");
    QTest::addColumn<QString>("error");
    QTest::newRow("missing param folder") << "remove-folder"
                                          << "fc2.weight"
                                          << "universal-param-missing";
    QTest::newRow("NaN in exp_avg_sq") << "nan"
                                       << "fc1.weight"
                                       << "nonfinite-values";
    QTest::newRow("wrong shape") << "shape"
                                 << "fc3.weight"
                                 << "shape-mismatch";
    QTest::newRow("stale fp32 masters") << "stale-fp32"
                                        << "fc2.weight"
                                        << "fp32-master-mismatch";
    QTest::newRow("no step for any loader") << "drop-step"
                                            << ""
                                            << "universal-step-missing";
  }
  void damageIsNamed() {
    REALDS_REQUIRE();
    QFETCH(QString, action);
    QFETCH(QString, param);
    QFETCH(QString, error);
    const auto e = realds::checkpoint("v145_z2_fp16_dp2");
    test::TempDir dir;
    convert(e.save_dir, dir.file("u"), {"--to", "universal"});
    const std::string tag = dir.file("u/" + e.tag + "_universal");
    std::vector<std::string> args{test::source_dir() + "/tests/realds/damage_universal.py", tag,
                                  action.toStdString()};
    if (!param.isEmpty()) args.push_back(param.toStdString());
    const auto d = realds::python_with_deepspeed(args, e.ds);
    QVERIFY2(d.exit_code == 0, describe(d).c_str());
    const auto dg = test::run_cli({"diagnose", dir.file("u"), "--json", "--device", "cpu"});
    QVERIFY2(dg.exit_code == 1, describe(dg).c_str());
    const auto errors = finding_codes(parse(dg.out), "error");
    QVERIFY2(errors == std::vector<std::string>{error.toStdString()}, dg.out.substr(0, 3000).c_str());
    if (!param.isEmpty()) {
      bool named = false;
      for (const auto& f : parse(dg.out)["findings"].toArray())
        if (f.toObject()["code"].toString() == error)
          named = f.toObject()["params"].toArray().contains(param);
      QVERIFY2(named, dg.out.substr(0, 3000).c_str());
    }
    // A conversion refuses damaged input rather than carrying it on.
    if (action == "remove-folder" || action == "shape") {
      const auto r =
          test::run_cli({"convert", dir.file("u"), "-o", dir.file("z"), "--to", "zero", "--world-size", "2"});
      QVERIFY2(r.exit_code == 2 && !fs::exists(dir.file("z")), describe(r).c_str());
    }
    // DeepSpeed agrees that a missing folder is fatal.
    if (action == "remove-folder") {
      const auto c = load_universal(dir.file("u"), e.name, 2);
      QVERIFY2(!c.verdict()["load_ok"].toBool(), c.describe().c_str());
    }
  }

  // What convert refuses, each with nothing written.
  void refusals() {
    REALDS_REQUIRE();
    test::TempDir dir;
    const auto z3 = realds::checkpoint("z3_fp16_dp2");
    const auto z2 = realds::checkpoint("z2_fp16_dp2");
    const auto tp_z3 = realds::checkpoint("par_tp_z3");
    struct Case {
      std::vector<std::string> args;
      std::string says;
    };
    const std::vector<Case> cases = {
        {{"convert", z2.save_dir, "-o", dir.file("a")}, "--to"},
        {{"convert", z3.save_dir, "-o", dir.file("a"), "--to", "universal"},
         "ZeRO-3 universal checkpoints are written for DeepSpeed 0.19"},
        {{"convert", tp_z3.save_dir, "-o", dir.file("a"), "--to", "universal", "--for-deepspeed", "0.19.0"},
         "a tensor-parallel ZeRO-3 checkpoint (tp 2)"},
        {{"convert", z2.save_dir, "-o", dir.file("a"), "--to", "universal", "--for-deepspeed", "0.11.0"},
         "0.12.3"},
        {{"convert", z2.save_dir, "-o", z2.tag_dir() + "/inside", "--to", "universal"}, "inside the input"},
        {{"convert", z2.save_dir, "-o", dir.file("a"), "--to", "zero", "--world-size", "2"},
         "not a universal"},
    };
    for (const auto& c : cases) {
      const auto r = test::run_cli(c.args);
      QVERIFY2(r.exit_code == 2 && r.err.find(c.says) != std::string::npos, describe(r).c_str());
      QVERIFY(!fs::exists(dir.file("a")));
    }
    QVERIFY(!fs::exists(z2.tag_dir() + "/inside"));
    // A universal folder is not converted to universal again.
    convert(z2.save_dir, dir.file("u"), {"--to", "universal"});
    const auto again = test::run_cli({"convert", dir.file("u"), "-o", dir.file("a"), "--to", "universal"});
    QVERIFY2(again.exit_code == 2 && again.err.find("already a universal") != std::string::npos,
             describe(again).c_str());
  }
};

QTEST_GUILESS_MAIN(TestRealdsUniversal)
#include "test_realds_universal.moc"
