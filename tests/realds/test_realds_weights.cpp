// The weights that leave training, judged on checkpoints real DeepSpeed wrote: sharded exports read back by
// torch 1.13 (.bin shards + index) and by ckptdoc's safetensors reader, equal tensor by tensor to the
// single-file export and to DeepSpeed's own zero_to_fp32.py; and `ckptdoc diff` of a checkpoint against its
// refresh-fp32 repair lists exactly the fp32 masters that DeepSpeed's zero_to_fp32.py sees change.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>
#include <map>
#include <set>

#include "ckptdoc/format/safetensors.h"
#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

QJsonObject json_of(const std::string& text) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(text)).object();
}

test::RunResult compare(const std::vector<std::string>& args) {
  return test::run_python(test::script("fixtures/compare_state_dicts.py"), args);
}

// name -> the tensor's bytes, read with ckptdoc's own safetensors reader.
std::map<std::string, std::vector<uint8_t>> safetensors_bytes(const std::vector<std::string>& files) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& f : files)
    for (const auto& e : SafetensorsFile::open(f).entries)
      if (!out.emplace(e.name, e.tensor.to_bytes()).second)
        throw std::runtime_error(e.name + " in two shards");
  return out;
}

// A Trainer checkpoint-N/ folder (ZeRO-3, dp 2) written by real DeepSpeed with
// tests/realds/trainer_driver.py.
std::string trainer_checkpoint(const test::TempDir& tmp, const std::string& weights) {
  const std::string harness = test::source_dir() + "/../shared/deepspeed/harness";
  const auto r =
      realds::python_with_deepspeed({harness + "/launch.py", "--world", "2", "--logdir", tmp.file("logs"),
                                     "--", test::source_dir() + "/tests/realds/trainer_driver.py", "--out",
                                     tmp.file("run"), "--steps", "3", "--weights", weights});
  if (r.exit_code != 0) throw std::runtime_error("trainer_driver.py failed:\n" + r.out + r.err);
  return tmp.file("run/checkpoint-3");
}

}  // namespace

class TestRealdsWeights : public QObject {
  Q_OBJECT

 private slots:
  void shardedExport_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<bool>("zero_to_fp32");  // DeepSpeed's script reads it (it rejects BF16_Optimizer files)
    QTest::newRow("z2_fp16_dp3_edge (tied head, frozen bias)") << "z2_fp16_dp3_edge" << true;
    QTest::newRow("z3_fp16_dp4_subgroups") << "z3_fp16_dp4_subgroups" << true;
    QTest::newRow("v145_z2_bf16_dp3") << "v145_z2_bf16_dp3" << true;
    QTest::newRow("bf16opt_s1_dp2") << "bf16opt_s1_dp2" << false;
  }
  void shardedExport() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(bool, zero_to_fp32);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir tmp;
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", tmp.file("one.bin")}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", tmp.file("one.safetensors")}), 0);
    // Every comparison below is made by one compare_state_dicts.py run at the end (a torch start is seconds).
    std::vector<std::string> checks;
    auto check = [&](std::initializer_list<std::string> args) {
      if (!checks.empty()) checks.push_back("--then");
      checks.insert(checks.end(), args);
    };
    if (zero_to_fp32) check({tmp.file("one.bin"), realds::reference(e.name, "zero_to_fp32")});

    // torch shards: 60 kB each (the model has ~84k params: several shards, the 301x96 and 173x301 matrices
    // over the limit on their own), read back by torch with the index.
    auto r = test::run_cli(
        {"export", e.save_dir, "-o", tmp.file("pt"), "--format", "torch", "--max-shard-size", "60KB"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto files = test::files_in(tmp.file("pt"));
    QVERIFY2(files.size() >= 4 && files.back() == "pytorch_model.bin.index.json", r.out.c_str());
    check({tmp.file("pt"), tmp.file("one.bin"), "--ignore-order"});
    if (zero_to_fp32) check({tmp.file("pt"), realds::reference(e.name, "zero_to_fp32"), "--ignore-order"});
    if (e.model == "edge") {
      // zero_to_fp32's tied head shares its owner's storage: in the owner's shard, one storage for both
      // names.
      const auto tied = test::run_python(test::script("realds/shards_share_storage.py"), {tmp.file("pt")});
      CKPTDOC_EXPECT_EXIT(tied, 0);
    }

    // safetensors shards, read with ckptdoc's reader: the same bytes as the single-file export, tensor by
    // tensor.
    r = test::run_cli({"export", e.save_dir, "-o", tmp.file("st"), "--max-shard-size", "60KB"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    std::vector<std::string> shards;
    for (const auto& f : test::files_in(tmp.file("st")))
      if (f.size() > 12 && f.substr(f.size() - 12) == ".safetensors") shards.push_back(tmp.file("st/" + f));
    QVERIFY(shards.size() >= 3);
    QCOMPARE(safetensors_bytes(shards), safetensors_bytes({tmp.file("one.safetensors")}));
    check({tmp.file("st"), tmp.file("one.bin"), "--ignore-order"});
    CKPTDOC_EXPECT_EXIT(compare(checks), 0);
    // One shard when everything fits: the plain name and no index, as zero_to_fp32.py writes it.
    CKPTDOC_EXPECT_EXIT(
        test::run_cli({"export", e.save_dir, "-o", tmp.file("big"), "--max-shard-size", "5GB"}), 0);
    QCOMPARE(test::files_in(tmp.file("big")), std::vector<std::string>{"model.safetensors"});
    // And a diagnosis of the folder it wrote is clean, its tensors equal to the checkpoint's.
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", tmp.file("st")}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diff", e.save_dir, tmp.file("pt")}), 0);
  }

  // `diff` of a checkpoint against its refresh-fp32 repair lists exactly the masters that changed, with the
  // largest change torch measures between DeepSpeed's own consolidations of the two.
  void diffAgainstRefreshFp32_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("damage");  // damage.py action applied to the copy first, or ""
    QTest::newRow("seed_z2_fp16_no_optim (#762, every master stale)") << "seed_z2_fp16_no_optim"
                                                                      << "";
    QTest::newRow("z2_fp16_dp2 (healthy: masters differ from float(lp) by rounding)") << "z2_fp16_dp2"
                                                                                      << "";
    QTest::newRow("z2_bf16_dp2, rank 1 stale") << "z2_bf16_dp2"
                                               << "stale-fp32 1";
    QTest::newRow("z1_fp16_dp2, rank 0 drifted") << "z1_fp16_dp2"
                                                 << "drift-fp32 0";
  }
  void diffAgainstRefreshFp32() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(QString, damage);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir tmp;
    const std::string in = realds::copy_of(e, tmp);
    if (!damage.isEmpty()) {
      std::vector<std::string> args{test::source_dir() + "/tests/realds/damage.py", in};
      for (const auto& a : damage.split(' ')) args.push_back(a.toStdString());
      CKPTDOC_EXPECT_EXIT(realds::python_with_deepspeed(args, e.ds), 0);
    }
    const std::string fixed = tmp.file("fixed");
    auto r = test::run_cli({"repair", in, "-o", fixed, "--refresh-fp32", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);

    // The oracle: DeepSpeed's zero_to_fp32.py on both, compared in torch.
    // (an undamaged input's consolidation is the cached reference)
    const std::string in_bin =
        damage.isEmpty() ? realds::reference(e.name, "zero_to_fp32") : tmp.file("in.bin");
    if (!damage.isEmpty()) CKPTDOC_EXPECT_EXIT(realds::zero_to_fp32(in, in_bin, e.ds), 0);
    CKPTDOC_EXPECT_EXIT(realds::zero_to_fp32(fixed, tmp.file("fixed.bin"), e.ds), 0);
    const auto o =
        test::run_python(test::script("realds/state_dict_diff.py"), {in_bin, tmp.file("fixed.bin")});
    CKPTDOC_EXPECT_EXIT(o, 0);
    const auto oracle = json_of(o.out)["differ"].toObject();
    QVERIFY2(!oracle.isEmpty(), o.out.c_str());

    r = test::run_cli({"diff", in, fixed, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    const auto j = json_of(r.out);
    QVERIFY(j["added"].toArray().isEmpty() && j["removed"].toArray().isEmpty() &&
            j["shape_changed"].toArray().isEmpty());
    std::map<std::string, double> listed;
    for (const auto& t : j["tensors"].toArray()) {
      const auto x = t.toObject();
      if (!x["equal"].toBool()) listed[x["name"].toString().toStdString()] = x["max_abs_diff"].toDouble();
    }
    std::set<std::string> want, got;
    for (auto it = oracle.begin(); it != oracle.end(); ++it) want.insert(it.key().toStdString());
    for (const auto& [n, v] : listed) got.insert(n);
    QCOMPARE(got, want);
    for (auto it = oracle.begin(); it != oracle.end(); ++it)
      QCOMPARE(listed.at(it.key().toStdString()), it.value().toDouble());
    // Worst first, and the text names them too.
    const auto tensors = j["tensors"].toArray();
    for (int i = 1; i < tensors.size(); ++i)
      if (!tensors[i].toObject()["equal"].toBool())
        QVERIFY(tensors[i - 1].toObject()["rel_l2"].toDouble() >= tensors[i].toObject()["rel_l2"].toDouble());
    r = test::run_cli({"diff", in, fixed});
    QVERIFY2(r.out.find(listed.begin()->first) != std::string::npos, r.out.c_str());
    // The 16-bit weights a refresh reads are unchanged; a checkpoint equals itself; moments are kept.
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diff", in, fixed, "--what", "lp"}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diff", in, in}), 0);
    if (e.steps > 0 && e.kind == "train")
      CKPTDOC_EXPECT_EXIT(test::run_cli({"diff", in, fixed, "--what", "exp_avg_sq"}), 0);
    // A tolerance as wide as the largest change makes them equal.
    double worst = 0;
    for (const auto& [n, v] : listed) worst = std::max(worst, v);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diff", in, fixed, "--atol", std::to_string(worst * 1.01)}), 0);
  }

  // Checkpoints against weights files: names match after `module.`, a moment diff of a weights file is
  // unusable.
  void diffAcrossKinds() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z2_fp16_dp2");
    test::TempDir tmp;
    const auto lp = realds::reference(e.name, "lp");  // the module's weights as float32, saved by torch
    auto r = test::run_cli({"diff", e.save_dir, lp, "--what", "lp", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 1);  // float16 vs float32: dtype changed, values equal
    for (const auto& t : json_of(r.out)["tensors"].toArray()) {
      const auto x = t.toObject();
      QCOMPARE(x["exact_fraction"].toDouble(), 1.0);
      QCOMPARE(x["dtype_b"].toString(), QString("float32"));
    }
    r = test::run_cli({"diff", lp, e.save_dir, "--what", "exp_avg"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("no optimizer moments") != std::string::npos, r.err.c_str());
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diff", e.save_dir, tmp.file("missing")}), 2);
  }

  // A Trainer checkpoint-N/ folder opens as one checkpoint; for ZeRO-3 its model.safetensors (gathered by
  // DeepSpeed) is the 16-bit side: diagnose compares it with the fp32 masters, export --source lp and
  // repair --refresh-fp32 use it without --lp-source, and real DeepSpeed loads the repaired checkpoint.
  void trainerCheckpointZero3() {
    REALDS_REQUIRE();
    test::TempDir tmp;
    const std::string ck = trainer_checkpoint(tmp, "gathered");
    auto r = test::run_cli({"inspect", ck, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    auto j = json_of(r.out);
    QCOMPARE(j["kind"].toString(), QString("deepspeed"));
    QCOMPARE(j["zero_stage"].toInt(), 3);
    QCOMPARE(j["tag"].toString(), QString("global_step3"));
    std::set<std::string> saved;
    for (const auto& t : j["trainer_weights"].toObject()["tensors"].toArray())
      saved.insert(t.toObject()["name"].toString().toStdString());
    for (const auto& g : j["groups"].toArray())
      for (const auto& p : g.toObject()["params"].toArray())
        QVERIFY(saved.count(p.toObject()["name"].toString().toStdString()));
    r = test::run_cli({"diagnose", ck, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    j = json_of(r.out);
    QVERIFY2(realds::codes(j, "error").empty() && realds::codes(j, "warning").empty(),
             r.out.substr(0, 3000).c_str());
    for (const auto& p :
         j["params"].toArray()) {  // every param: its 16-bit weight is the rounding of its master
      const auto d = p.toObject()["lp_vs_fp32"].toObject();
      QVERIFY2(!d.isEmpty(), r.out.substr(0, 2000).c_str());
      QVERIFY2(d["exact_fraction"].toDouble() > 0.999, r.out.substr(0, 2000).c_str());
    }
    r = test::run_cli({"export", ck, "-o", tmp.file("lp.safetensors"), "--source", "lp"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diff", tmp.file("lp.safetensors"), ck + "/model.safetensors"}), 0);
    r = test::run_cli({"repair", ck, "-o", tmp.file("fixed"), "--refresh-fp32", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("model.safetensors") != std::string::npos,
             r.out.c_str());  // the plan names its source
    const auto load = realds::load(tmp.file("fixed"), "z3_fp16_dp2", {"--strict"});
    REALDS_EXPECT_STRICT(load);
  }

  // The same folder whose model.safetensors holds ZeRO-3 placeholders: named as such, and not used as
  // weights.
  void trainerCheckpointPlaceholders() {
    REALDS_REQUIRE();
    test::TempDir tmp;
    const std::string ck = trainer_checkpoint(tmp, "placeholder");
    auto r = test::run_cli({"diagnose", ck, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    const auto j = json_of(r.out);
    QCOMPARE(realds::codes(j, "error"), std::vector<std::string>{"placeholder-tensor"});
    r = test::run_cli({"diagnose", ck + "/model.safetensors"});  // the file alone, config.json beside it
    CKPTDOC_EXPECT_EXIT(r, 1);
    QVERIFY2(r.out.find("placeholder-tensor") != std::string::npos &&
                 r.out.find("hidden_size 301") != std::string::npos,
             r.out.c_str());
    r = test::run_cli({"repair", ck, "-o", tmp.file("fixed"), "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("0 elements") != std::string::npos, r.err.c_str());
    QVERIFY(!fs::exists(tmp.file("fixed")));
  }
};

CKPTDOC_TEST_MAIN(TestRealdsWeights)
#include "test_realds_weights.moc"
