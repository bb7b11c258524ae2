// Universal checkpoints with today's DeepSpeed (0.19.x in the judges' venv) as the judge: ckptdoc reads the
// folders 0.19's own ds_to_universal.py writes from 0.19 checkpoints (ZeRO-1/2, and ZeRO-3, whose files hold
// bare flat tensors and no step.pt) with the values torch reads from them, names damage in them, and its own
// `convert --to universal` (ZeRO-1/2/3) writes the files 0.19's converter writes and loads in 0.19 at another
// dp size.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

using realds::describe;
using realds::parse;

const std::string kDs = "0.19";

QJsonObject cli_json(const std::vector<std::string>& args, int want_exit) {
  const auto r = test::run_cli(args);
  if (r.exit_code != want_exit)
    throw std::runtime_error("ckptdoc exit " + std::to_string(r.exit_code) + " (want " +
                             std::to_string(want_exit) + "): " + describe(r));
  return parse(r.out);
}

// 0.19's ds_to_universal.py on an entry's tag folder (--inject_missing_state: DeepSpeed's engine saves no
// universal_checkpoint_info of its own).
void ds_to_universal(const realds::Entry& e, const std::string& out_tag_dir) {
  fs::create_directories(fs::path(out_tag_dir).parent_path());
  const auto r = realds::python_with_deepspeed(
      {"-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", e.tag_dir(), "--output_folder",
       out_tag_dir, "--num_extract_workers", "1", "--num_merge_workers", "1", "--inject_missing_state"},
      kDs);
  if (r.exit_code != 0) throw std::runtime_error("ds_to_universal.py failed: " + describe(r));
}

// universal_values.py: the folder as torch reads it; `fp32_out` gets the masters in their params' shapes.
QJsonObject torch_values(const std::string& tag_dir, const std::string& fp32_out, const test::TempDir& dir) {
  const std::string out = dir.file("values.json");
  const auto r = realds::python_with_deepspeed(
      {test::source_dir() + "/tests/realds/universal_values.py", tag_dir, "--json", out, "--fp32", fp32_out},
      kDs);
  if (r.exit_code != 0) throw std::runtime_error("universal_values.py failed: " + describe(r));
  return parse(test::read_text(out));
}

std::string text(const QJsonObject& o) {
  return QJsonDocument(o).toJson(QJsonDocument::Compact).left(4000).toStdString();
}

std::set<QString> strings(const QJsonArray& a) {
  std::set<QString> s;
  for (const auto& v : a) s.insert(v.toString());
  return s;
}

// The Adam step DeepSpeed itself reports after loading the source (realds.py's reference load).
double source_adam_step(const std::string& name) {
  const auto ref = fs::path(realds::reference(name, "fp32")).parent_path() / "input_load.json";
  const auto steps =
      parse(test::read_text(ref.string()))["after_load_summary"].toObject()["adam_step_per_group"].toArray();
  if (steps.isEmpty()) throw std::runtime_error("no Adam step in " + ref.string());
  return steps.first().toArray().at(1).toDouble();
}

}  // namespace

class TestRealdsUniversalV019 : public QObject {
  Q_OBJECT

  // 0.19's output per entry, made once per run of this binary: save folder -> TempDir holding it.
  std::map<std::string, std::unique_ptr<test::TempDir>> theirs_;

  // The save folder holding 0.19's universal folder of `name` (tag <tag>_universal, latest_universal).
  std::string theirs(const realds::Entry& e) {
    auto& d = theirs_[e.name];
    if (!d) {
      auto made = std::make_unique<test::TempDir>();
      ds_to_universal(e, made->file("save/" + e.tag + "_universal"));
      d = std::move(made);
    }
    return d->file("save");
  }

 private slots:
  // inspect, diagnose and export of 0.19's folders: the params, states, steps and values torch reads from
  // them, and no error or warning on a healthy folder.
  void readsDsToUniversalOutput_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("ZeRO-2 bf16: {'param': t, 'cat_dim': 0} files, step.pt, the buffer's fp32.pt")
        << "v019_z2_bf16_dp2";
    QTest::newRow("ZeRO-3 fp16: bare flat tensors, the step in optimizer_state.pt") << "v019_z3_fp16_dp2";
  }
  void readsDsToUniversalOutput() {
    REALDS_REQUIRE_DS(kDs);
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    const std::string save = theirs(e), tag = save + "/" + e.tag + "_universal";
    test::TempDir dir;
    const auto torch = torch_values(tag, dir.file("fp32_torch.pt"), dir);
    const auto tparams = torch["params"].toObject();
    const bool zero3 = e.stage == 3;

    const auto cat = cli_json({"inspect", save, "--json"}, 0);
    QCOMPARE(cat["kind"].toString(), QString("deepspeed-universal"));
    const auto u = cat["universal"].toObject();
    std::set<QString> ours_params, trainable = strings(torch["trainable"].toArray());
    for (const auto& pv : u["params"].toArray()) {
      const auto p = pv.toObject();
      const QString n = p["name"].toString();
      ours_params.insert(n);
      const auto t = tparams[n].toObject();
      QVERIFY2(!t.isEmpty(), ("no folder for " + n.toStdString()).c_str());
      std::set<QString> states = strings(p["states"].toArray());
      states.erase("step");
      QCOMPARE(states, strings(t["states"].toArray()));
      QCOMPARE(p["step"].toVariant(), t["step"].toVariant());  // null for ZeRO-3: no step.pt
    }
    QCOMPARE(ours_params, trainable);
    QCOMPARE(static_cast<int>(trainable.size()), 8);
    std::set<QString> others;  // folders of no trainable param: 0.19 writes the module's buffer
    for (auto it = tparams.begin(); it != tparams.end(); ++it)
      if (!trainable.count(it.key())) others.insert(it.key());
    QCOMPARE(strings(u["module_entry_folders"].toArray()), others);
    QCOMPARE(others, zero3 ? std::set<QString>{} : std::set<QString>{"out_scale"});
    QVERIFY(u["unexpected_folders"].toArray().isEmpty());
    if (zero3) {
      QVERIFY(!torch["optimizer_step"].isNull());
      QCOMPARE(u["zero3_step"].toDouble(), torch["optimizer_step"].toDouble());
    }

    // diagnose: clean, and each state's count, NaNs, min and max are torch's.
    const auto report = cli_json({"diagnose", save, "--json", "--device", "cpu"}, 0);
    QVERIFY2(realds::codes(report, "error").empty() && realds::codes(report, "warning").empty(),
             text(report).c_str());
    int checked = 0;
    for (const auto& pv : report["params"].toArray()) {
      const auto p = pv.toObject();
      const auto t = tparams[p["name"].toString()].toObject();
      for (const char* s : {"fp32", "exp_avg", "exp_avg_sq"}) {
        const auto ours = p[s].toObject(), want = t[s].toObject();
        const std::string where = p["name"].toString().toStdString() + " " + s;
        QVERIFY2(!ours.isEmpty() && !want.isEmpty(), where.c_str());
        QVERIFY2(ours["count"].toDouble() == want["count"].toDouble(), where.c_str());
        QVERIFY2(ours["nan"].toDouble() == want["nan"].toDouble(), where.c_str());
        QVERIFY2(ours["min"].toDouble() == want["min"].toDouble(), where.c_str());
        QVERIFY2(ours["max"].toDouble() == want["max"].toDouble(), where.c_str());
        ++checked;
      }
    }
    QCOMPARE(checked, 8 * 3);

    // export: the masters torch reads, in their params' shapes, bit for bit.
    const std::string out = dir.file("export.pt");
    const auto ex = test::run_cli({"export", save, "-o", out, "--format", "torch"});
    QVERIFY2(ex.exit_code == 0, describe(ex).c_str());
    const auto cmp = test::run_python(test::script("fixtures/compare_state_dicts.py"),
                                      {out, dir.file("fp32_torch.pt"), "--ignore-order"});
    QVERIFY2(cmp.exit_code == 0, describe(cmp).c_str());
  }

  // Damage in 0.19's folders is named with the param it hits.
  void damageIsNamed_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("action");
    QTest::addColumn<QString>("param");
    QTest::addColumn<QString>("error");
    QTest::newRow("ZeRO-2: NaN in exp_avg_sq") << "v019_z2_bf16_dp2"
                                               << "nan"
                                               << "fc1.weight"
                                               << "nonfinite-values";
    QTest::newRow("ZeRO-2: missing folder") << "v019_z2_bf16_dp2"
                                            << "remove-folder"
                                            << "fc2.weight"
                                            << "universal-param-missing";
    QTest::newRow("ZeRO-3: NaN in a bare exp_avg_sq") << "v019_z3_fp16_dp2"
                                                      << "nan"
                                                      << "fc1.weight"
                                                      << "nonfinite-values";
    QTest::newRow("ZeRO-3: a bare tensor one element short") << "v019_z3_fp16_dp2"
                                                             << "shape"
                                                             << "fc3.weight"
                                                             << "shape-mismatch";
    QTest::newRow("ZeRO-3: no step in optimizer_state.pt") << "v019_z3_fp16_dp2"
                                                           << "drop-zero3-step"
                                                           << ""
                                                           << "universal-step-missing";
  }
  void damageIsNamed() {
    REALDS_REQUIRE_DS(kDs);
    QFETCH(QString, name);
    QFETCH(QString, action);
    QFETCH(QString, param);
    QFETCH(QString, error);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const std::string save = dir.file("u");
    fs::copy(theirs(e), save, fs::copy_options::recursive);
    std::vector<std::string> args{test::source_dir() + "/tests/realds/damage_universal.py",
                                  save + "/" + e.tag + "_universal", action.toStdString()};
    if (!param.isEmpty()) args.push_back(param.toStdString());
    const auto d = realds::python_with_deepspeed(args, kDs);
    QVERIFY2(d.exit_code == 0, describe(d).c_str());
    const auto report = cli_json({"diagnose", save, "--json", "--device", "cpu"}, 1);
    QVERIFY2(realds::codes(report, "error") == std::vector<std::string>{error.toStdString()},
             text(report).c_str());
    if (!param.isEmpty()) {
      bool named = false;
      for (const auto& f : report["findings"].toArray())
        if (f.toObject()["code"].toString() == error)
          named = f.toObject()["params"].toArray().contains(param);
      QVERIFY2(named, text(report).c_str());
    }
  }

  // ckptdoc's conversion of a 0.19 checkpoint: the files 0.19's converter writes, tensor for tensor (ckptdoc
  // adds `iteration` to the ZeRO-1/2 model file, for 0.12.3-0.14.0's loaders). For an older target the
  // module's buffer is not written: that output differs from 0.19's by exactly that file. ZeRO-3's output
  // (bare flat tensors, rank 0's whole optimizer state, both model files) is 0.19's exactly; an older target
  // is refused.
  void convertEqualsDsToUniversal_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("ZeRO-1 fp16") << "v019_z1_fp16_dp2";
    QTest::newRow("ZeRO-2 bf16") << "v019_z2_bf16_dp2";
    QTest::newRow("ZeRO-3 fp16") << "v019_z3_fp16_dp2";
    QTest::newRow("ZeRO-3 bf16") << "v019_z3_bf16_dp2";
  }
  void convertEqualsDsToUniversal() {
    REALDS_REQUIRE_DS(kDs);
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    const bool zero3 = e.stage == 3;
    const std::string theirs_tag = theirs(e) + "/" + e.tag + "_universal";
    test::TempDir dir;
    const auto report =
        cli_json({"convert", e.save_dir, "-o", dir.file("ours"), "--to", "universal", "--json"}, 0);
    QVERIFY2(report["ok"].toBool(), text(report).c_str());
    const std::string iteration = "mp_rank_00_model_states.pt:iteration";
    const auto c = realds::compare_universal_folders(
        theirs_tag, dir.file("ours/" + e.tag + "_universal"), kDs,
        zero3 ? std::vector<std::string>{} : std::vector<std::string>{iteration}, dir);
    QVERIFY2(c["ok"].toBool(), text(c).c_str());
    // 8 params x (fp32, exp_avg, exp_avg_sq, and for ZeRO-1/2 step), optimizer_state.pt, the model file(s)
    // (ZeRO-1/2: also the buffer's fp32.pt)
    QCOMPARE(c["compared"].toInt(), zero3 ? 8 * 3 + 1 + e.dp : 8 * 4 + 3);
    int extra = 0;
    for (const auto& f : c["files"].toArray()) extra += f.toObject()["extra_keys_ours"].toArray().size();
    QCOMPARE(extra, zero3 ? 0 : 1);
    if (zero3) {
      // The job's no-decay group: 0.19's ZeRO-3 loader would give it group 0's weight_decay.
      QVERIFY2(text(report).find("'weight_decay' differs from group 0's") != std::string::npos,
               text(report).c_str());
      const auto old = test::run_cli(
          {"convert", e.save_dir, "-o", dir.file("old"), "--to", "universal", "--for-deepspeed", "0.17.6"});
      QVERIFY2(old.exit_code == 2 && old.err.find("first sub-group") != std::string::npos,
               describe(old).c_str());
      QVERIFY(!fs::exists(dir.file("old")));
      return;
    }

    cli_json({"convert", e.save_dir, "-o", dir.file("old"), "--to", "universal", "--for-deepspeed", "0.14.5"},
             0);
    const auto old = realds::compare_universal_folders(theirs_tag, dir.file("old/" + e.tag + "_universal"),
                                                       kDs, {iteration}, dir);
    QCOMPARE(strings(old["only_theirs"].toArray()), std::set<QString>{"zero/out_scale/fp32.pt"});
  }

  // 0.19's engine loads ckptdoc's output with load_universal at another dp size and trains a step: fp32
  // masters and moments equal to what 0.19 consolidates from the source, at the source's Adam step.
  void loadsConvertedAtAnotherDp_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("world");
    QTest::newRow("ZeRO-2 bf16, dp 2 -> 3") << "v019_z2_bf16_dp2" << 3;
    QTest::newRow("ZeRO-1 fp16, dp 2 -> 1") << "v019_z1_fp16_dp2" << 1;
    QTest::newRow("ZeRO-3 fp16, dp 2 -> 3") << "v019_z3_fp16_dp2" << 3;
    QTest::newRow("ZeRO-3 bf16, dp 2 -> 4") << "v019_z3_bf16_dp2" << 4;
  }
  void loadsConvertedAtAnotherDp() {
    REALDS_REQUIRE_DS(kDs);
    QFETCH(QString, name);
    QFETCH(int, world);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    cli_json({"convert", e.save_dir, "-o", dir.file("u"), "--to", "universal", "--json"}, 0);
    const auto c = realds::load(
        dir.file("u"), e.name,
        {"--strict", "--timeout", "900", "--universal", "--expect-fp32", realds::reference(e.name, "fp32"),
         "--expect-moments", realds::reference(e.name, "moments")},
        world);
    REALDS_EXPECT_STRICT(c);
    std::set<double> steps;
    for (const auto& g : c.report["after_load_summary"].toObject()["adam_step_per_group"].toArray())
      steps.insert(g.toArray().at(1).toDouble());
    QVERIFY2(steps == std::set<double>{source_adam_step(e.name)}, c.describe().c_str());
  }

  // universal_checkpoint_info as 0.19 records it (version 0.4) in the model file: ckptdoc's files equal
  // 0.19's converter's without --inject_missing_state, the model file copied as it is (no `iteration` added
  // for a 0.14.1+ target). A newer version, or an AutoTP affine map, is refused with nothing written.
  void universalInfoVersions() {
    REALDS_REQUIRE_DS(kDs);
    const auto e = realds::checkpoint("v019_z1_fp16_dp2");
    test::TempDir dir;
    const std::string in = realds::copy_of(e, dir);
    const std::string model = in + "/" + e.tag + "/mp_rank_00_model_states.pt";
    auto set_info = [&](const std::string& info) {
      const auto r = realds::python_with_deepspeed(
          {"-c",
           "import sys, torch\nsd = torch.load(sys.argv[1], weights_only=False)\n"
           "sd['universal_checkpoint_info'] = eval(sys.argv[2])\ntorch.save(sd, sys.argv[1])\n",
           model, info},
          kDs);
      QVERIFY2(r.exit_code == 0, describe(r).c_str());
    };
    set_info("{'universal_checkpoint_version': 0.4}");
    const std::string theirs_tag = dir.file("theirs/" + e.tag + "_universal");
    fs::create_directories(fs::path(theirs_tag).parent_path());
    const auto d = realds::python_with_deepspeed(
        {"-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", in + "/" + e.tag, "--output_folder",
         theirs_tag, "--num_extract_workers", "1", "--num_merge_workers", "1"},
        kDs);
    QVERIFY2(d.exit_code == 0, describe(d).c_str());
    const auto report = cli_json({"convert", in, "-o", dir.file("ours"), "--to", "universal", "--json"}, 0);
    QVERIFY2(report["assumptions"].toArray().isEmpty(), text(report).c_str());
    const auto c =
        realds::compare_universal_folders(theirs_tag, dir.file("ours/" + e.tag + "_universal"), kDs, {}, dir);
    QVERIFY2(c["ok"].toBool(), text(c).c_str());
    QCOMPARE(c["compared"].toInt(), 8 * 4 + 3);
    const auto ins = cli_json({"inspect", dir.file("ours"), "--json"}, 0);
    QCOMPARE(ins["universal"].toObject()["universal_checkpoint_version"].toDouble(), 0.4);

    for (const auto& [info, says] :
         {std::pair<std::string, std::string>{"{'universal_checkpoint_version': 0.5}", "newer than the 0.4"},
          {"{'universal_checkpoint_version': 0.4, 'affine_map': {'version': 1, 'params': {'fc1.weight': "
           "{}}}}",
           "affine_map"}}) {
      set_info(info);
      const auto r = test::run_cli({"convert", in, "-o", dir.file("refused"), "--to", "universal"});
      QVERIFY2(r.exit_code == 2 && r.err.find(says) != std::string::npos, describe(r).c_str());
      QVERIFY(!fs::exists(dir.file("refused")));
    }
  }

  // 0.19's own universal folder back to rigid ZeRO files at dp 3 (convert --to zero, the source as the
  // template of its hyper-parameters): 0.19 loads them without load_universal, strictly, with the source's
  // masters, moments and Adam step, and trains a step. (ZeRO-3's universal folders are refused: 0.19 loads
  // those at any dp itself.)
  void backToZeroLoads_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("ZeRO-2 bf16") << "v019_z2_bf16_dp2";
    QTest::newRow("ZeRO-1 fp16") << "v019_z1_fp16_dp2";
  }
  void backToZeroLoads() {
    REALDS_REQUIRE_DS(kDs);
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    cli_json({"convert", theirs(e), "-o", dir.file("zero"), "--to", "zero", "--world-size", "3", "--target",
              e.save_dir, "--json"},
             0);
    const auto c = realds::load(dir.file("zero"), e.name,
                                {"--strict", "--expect-fp32", realds::reference(e.name, "fp32"),
                                 "--expect-moments", realds::reference(e.name, "moments")},
                                3);
    REALDS_EXPECT_STRICT(c);
    std::set<double> steps;
    for (const auto& g : c.report["after_load_summary"].toObject()["adam_step_per_group"].toArray())
      steps.insert(g.toArray().at(1).toDouble());
    QVERIFY2(steps == std::set<double>{source_adam_step(e.name)}, c.describe().c_str());
  }

  // ZeRO-3 with a frozen param (the edge model's fc1.bias) is refused, naming it, with nothing written:
  // 0.19's converter writes no folder for it and its universal loader restores only the optimizer's groups.
  void zero3FrozenParamsRefused() {
    REALDS_REQUIRE_DS(kDs);
    const auto e = realds::checkpoint("v019_z3_fp16_dp2_edge");
    test::TempDir dir;
    const auto r = test::run_cli({"convert", e.save_dir, "-o", dir.file("u"), "--to", "universal"});
    QVERIFY2(r.exit_code == 2 && r.err.find("frozen params ('fc1.bias')") != std::string::npos,
             describe(r).c_str());
    QVERIFY(!fs::exists(dir.file("u")));
  }

  // ZeRO-3 whose sub_group_size splits a param group (v0.12.6's z3_fp16_dp4_subgroups): each sub-group is a
  // flat group of its own in the rank files and in the converter's param_shapes, so the output is 0.19's
  // converter's, file for file. Its own version (0.12.6) has no ZeRO-3 universal loader: refused unless a
  // 0.19 target is named.
  void convertsZero3SubGroups() {
    REALDS_REQUIRE_DS(kDs);
    const auto e = realds::checkpoint("z3_fp16_dp4_subgroups");
    // Its two param groups (decay, no decay) are three sub-groups: fc1.weight + fc2.weight, fc3.weight, the
    // rest.
    const auto cat = cli_json({"inspect", e.save_dir, "--json"}, 0);
    QCOMPARE(cat["groups"].toArray().size(), 3);
    test::TempDir dir;
    const auto refused = test::run_cli({"convert", e.save_dir, "-o", dir.file("ours"), "--to", "universal"});
    QVERIFY2(refused.exit_code == 2 && refused.err.find("0.19 or later") != std::string::npos,
             describe(refused).c_str());
    QVERIFY(!fs::exists(dir.file("ours")));
    const auto report = cli_json({"convert", e.save_dir, "-o", dir.file("ours"), "--to", "universal",
                                  "--for-deepspeed", "0.19.0", "--json"},
                                 0);
    QVERIFY2(report["ok"].toBool(), text(report).c_str());
    const auto c = realds::compare_universal_folders(theirs(e) + "/" + e.tag + "_universal",
                                                     dir.file("ours/" + e.tag + "_universal"), kDs, {}, dir);
    QVERIFY2(c["ok"].toBool(), text(c).c_str());
    QCOMPARE(c["compared"].toInt(), static_cast<int>(report["params"].toDouble()) * 3 + 1 + e.dp);
  }
};

QTEST_GUILESS_MAIN(TestRealdsUniversalV019)
#include "test_realds_universal_v019.moc"
