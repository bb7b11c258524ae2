// `ckptdoc inspect` and `ckptdoc export` as a user runs them: JSON fields on every real fixture, exports
// equal to DeepSpeed's own zero_to_fp32.py output bit for bit (checked in torch with weights_only=True and
// against the recorded sha256), generated checkpoints across stages, dtypes and dp sizes, export options,
// and damaged input.
#include <QtTest>
#include <filesystem>
#include <limits>
#include <memory>

#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/format/torch_file.h"
#include "deepspeed_reference.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

std::string fixture_dir(const std::string& name) {
  return test::deepspeed_fixture(name) + "/checkpoint";
}

test::RunResult compare(const std::string& actual, const std::string& expected) {
  return test::run_python(test::script("fixtures/compare_state_dicts.py"), {actual, expected});
}

QJsonObject inspect_json(const std::string& path) {
  const auto r = test::run_cli({"inspect", "--json", path});
  if (r.exit_code != 0) return {};
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

// name -> sha256 of every tensor in one of our output files, read back with our own readers.
std::map<std::string, std::string> output_hashes(const std::string& path) {
  std::map<std::string, std::string> out;
  if (path.size() > 12 && path.substr(path.size() - 12) == ".safetensors") {
    const auto f = SafetensorsFile::open(path);
    for (const auto& e : f.entries) out[e.name] = test::tensor_sha256(e.tensor);
  } else {
    const auto f = TorchFile::open(path);
    for (const auto& [k, v] : f.root.as_dict().items) out[k.as_str()] = test::tensor_sha256(v.as_tensor());
  }
  return out;
}

std::string copy_fixture(const test::TempDir& tmp) {
  test::copy_tree(fixture_dir("zero2_fp16_ws2"), tmp.file("ck"));
  return tmp.file("ck");
}

// exportGenerated's rows: a name and make_deepspeed_checkpoint.py's options.
const std::vector<std::pair<const char*, QStringList>>& generated_rows() {
  static const std::vector<std::pair<const char*, QStringList>> rows{
      {"zero1-fp16-dp1", {"--stage", "1", "--dp", "1"}},
      {"zero1-bf16-dp5-frozen", {"--stage", "1", "--dtype", "bf16", "--dp", "5", "--frozen"}},
      {"zero2-fp16-dp3-frozen-shared", {"--stage", "2", "--dp", "3", "--frozen", "--shared"}},
      {"zero2-bf16-dp8-tiny", {"--stage", "2", "--dtype", "bf16", "--dp", "8", "--layers", "7,5,3"}},
      {"zero2-fp16-dp4-v0.16.5",
       {"--stage", "2", "--dp", "4", "--ds-version", "0.16.5", "--layers", "9,7,3"}},
      {"zero2-fp16-dp6-v0.6.0", {"--stage", "2", "--dp", "6", "--ds-version", "0.6.0"}},
      {"zero3-fp16-dp4-subgroups-frozen-shared",
       {"--stage", "3", "--dp", "4", "--frozen", "--shared", "--sub-group-size", "20000"}},
      {"zero3-bf16-dp7-tiny", {"--stage", "3", "--dtype", "bf16", "--dp", "7", "--layers", "5,3,2"}},
      {"bf16opt-dp3", {"--bf16-optimizer", "--dp", "3"}},
  };
  return rows;
}

}  // namespace

class TestDeepspeedExport : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TempDir> generated_;  // exportGenerated's checkpoints, one folder per row

 private slots:
  void fixtures_data() {
    QTest::addColumn<QString>("name");
    for (const auto& n : test::deepspeed_fixture_names())
      QTest::newRow(n.c_str()) << QString::fromStdString(n);
  }

  void inspectJson_data() { fixtures_data(); }
  void inspectJson() {
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    const auto j = inspect_json(fixture_dir(n));
    QCOMPARE(j["kind"].toString(), QString("deepspeed"));
    QCOMPARE(j["tag"].toString(), QString("global_step5"));
    QCOMPARE(j["dp_world_size"].toInt(), 2);
    QCOMPARE(j["mp_world_size"].toInt(), 1);
    QCOMPARE(j["ds_version"].toString(), QString("0.12.6+c00388a2e"));
    QCOMPARE(j["lp_dtype"].toString(), QString(n.find("bf16") != std::string::npos ? "bfloat16" : "float16"));
    const int stage = n.rfind("zero3", 0) == 0 ? 3 : (n.rfind("zero2", 0) == 0 ? 2 : 1);
    QCOMPARE(j["zero_stage"].toInt(), stage);
    const char* wrapper = n.rfind("bf16opt", 0) == 0 ? "BF16_Optimizer"
                          : stage == 3               ? "DeepSpeedZeroOptimizer_Stage3"
                                                     : "DeepSpeedZeroOptimizer";
    QCOMPARE(j["optimizer_wrapper"].toString(), QString(wrapper));
    QCOMPARE(j["problems"].toArray().size(), 0);
    int optim = 0;
    for (const auto& f : j["files"].toArray()) {
      const auto o = f.toObject();
      QVERIFY(!o["path"].toString().contains('/'));
      QVERIFY(o["bytes"].toInteger() > 0);
      if (o["role"].toString() == "optim") {
        ++optim;
        QCOMPARE(o["mp_rank"].toInt(), 0);
      }
    }
    QCOMPARE(optim, 2);
    const auto groups = j["groups"].toArray();
    QCOMPARE(groups.size(), 2);
    const auto g0 = groups[0].toObject();
    QCOMPARE(g0["index"].toInt(), 0);
    QCOMPARE(g0["params"].toArray()[0].toObject()["name"].toString(), QString("fc1.weight"));
    QCOMPARE(g0["params"].toArray()[0].toObject()["shape"].toArray()[0].toInt(), 301);
    QCOMPARE(g0["partitions"].toArray().size(), 2);
    const auto frag = g0["partitions"].toArray()[0].toObject()["fragments"].toArray()[0].toObject();
    QCOMPARE(frag["param"].toString(), QString("fc1.weight"));
    QVERIFY(frag.contains("param_offset") && frag.contains("partition_offset") && frag.contains("numel"));
    if (stage != 3) QCOMPARE(g0["partition_numel"].toInteger(), 41610);
  }

  // What the views print of a checkpoint (its description, filled once when it is opened) is in the JSON too,
  // and agrees with what the real run recorded: its DeepSpeed version and ZeRO stage (engine_truth.json,
  // written by the fixture's training driver) and its files' sizes (checkpoint.reference.json).
  void inspectJsonDescribesAsTheViews_data() { fixtures_data(); }
  void inspectJsonDescribesAsTheViews() {
    QFETCH(QString, name);
    const std::string n = name.toStdString();
    const auto truth = test::read_json_file(test::deepspeed_fixture(n) + "/engine_truth.json");
    const auto reference = test::fixture_reference(n);
    const auto j = inspect_json(fixture_dir(n));
    QVERIFY(!j.isEmpty());
    const QString version = truth["versions"].toObject()["deepspeed"].toString();
    QVERIFY(!version.isEmpty());
    const auto facts = j["facts"].toArray();
    QCOMPARE(facts.size(), 1);
    QCOMPARE(facts[0].toObject()["label"].toString(), QString("DeepSpeed"));
    QCOMPARE(facts[0].toObject()["value"].toString(), version);
    QCOMPARE(j["writer_version"].toString(), version);
    const int stage = truth["zero_stage"].toInt();
    const QString partitioning = QString("ZeRO stage %1").arg(stage);
    QCOMPARE(j["partitioning_text"].toString(), partitioning);
    QVERIFY2(j["optimizer_text"].toString().contains(partitioning),
             qPrintable(j["optimizer_text"].toString()));
    QCOMPARE(j["optimizer_class"].toString(), j["optimizer_wrapper"].toString());
    QVERIFY(j["optimizer_text"].toString().startsWith(j["optimizer_class"].toString() + ", "));
    // The rank files DeepSpeed wrote (not `latest`), as the generator listed them with their sizes.
    int pt_files = 0;
    qint64 pt_bytes = 0;
    const auto files = reference["files"].toObject();
    for (auto it = files.begin(); it != files.end(); ++it)
      if (it.key().endsWith(".pt")) ++pt_files, pt_bytes += it.value().toObject()["size"].toInteger();
    QCOMPARE(j["file_count"].toInt(), pt_files);
    QCOMPARE(j["file_bytes"].toInteger(), pt_bytes);
    const auto caps = j["capabilities"].toObject();
    QCOMPARE(caps["weights_only"].toBool(), false);
    QCOMPARE(caps["convertible"].toBool(), true);
    QCOMPARE(caps["has_optimizer"].toBool(), true);
    QCOMPARE(caps["module_weights_file"].toBool(), true);
    QCOMPARE(caps["dp_independent"].toBool(), false);
    QCOMPARE(caps["lp_weights_elsewhere"].toBool(), stage == 3);
    QCOMPARE(caps["compares_lp_source"].toBool(), stage == 3);
  }

  void inspectText() {
    const auto r = test::run_cli({"inspect", fixture_dir("zero3_fp16_ws2")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("ZeRO stage       3") != std::string::npos);
    QVERIFY(r.out.find("DeepSpeedZeroOptimizer_Stage3") != std::string::npos);
    QVERIFY(r.out.find("zero_pp_rank_1_mp_rank_00_optim_states.pt") != std::string::npos);
    QVERIFY(r.out.find("none") != std::string::npos);  // no problems
  }

  void exportEqualsZeroToFp32_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("ext");
    for (const auto& n : test::deepspeed_fixture_names()) {
      if (n.rfind("bf16opt", 0) == 0) continue;
      QTest::newRow((n + "-safetensors").c_str()) << QString::fromStdString(n) << "safetensors";
      QTest::newRow((n + "-torch").c_str()) << QString::fromStdString(n) << "bin";
    }
  }
  void exportEqualsZeroToFp32() {
    QFETCH(QString, name);
    QFETCH(QString, ext);
    const std::string n = name.toStdString();
    test::TempDir tmp;
    const std::string out = tmp.file("out." + ext.toStdString());
    auto r = test::run_cli({"export", fixture_dir(n), "-o", out});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const std::string ref = test::deepspeed_fixture(n) + "/checkpoint.zero_to_fp32.bin";
    r = compare(out, ref);
    CKPTDOC_EXPECT_EXIT(r, 0);
    // And against the sha256 recorded when zero_to_fp32.py ran, read back with our own readers.
    const auto tensors =
        test::read_json_file(test::deepspeed_fixture(n) + "/checkpoint.zero_to_fp32.tensors.json")["tensors"]
            .toArray();
    const auto got = output_hashes(out);
    QCOMPARE(got.size(), static_cast<size_t>(tensors.size()));
    for (const auto& t : tensors) {
      const auto o = t.toObject();
      QCOMPARE(got.at(o["name"].toString().toStdString()), o["sha256"].toString().toStdString());
    }
  }

  void exportBf16Optimizer() {
    // zero_to_fp32.py rejects BF16_Optimizer files; the reference is a torch consolidation of the same
    // fp32 partitions (whose sha256 the catalog tests check against the reference json).
    test::TempDir tmp;
    const std::string ck = fixture_dir("bf16opt_zero1_ws2");
    auto r = test::run_cli({"export", ck, "-o", tmp.file("out.safetensors")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    r = test::run_python(test::script("bench/export_reference.py"),
                         {ck + "/global_step5", tmp.file("ref.bin")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    r = compare(tmp.file("out.safetensors"), tmp.file("ref.bin"));
    CKPTDOC_EXPECT_EXIT(r, 0);
  }

  void exportGenerated_data() {
    QTest::addColumn<QStringList>("args");
    for (const auto& [name, args] : generated_rows()) QTest::newRow(name) << args;
  }
  void exportGenerated() {
    // Every row's checkpoint is made by one generator run when the first row needs them (a torch start is
    // seconds), each in its own folder, with the row's options.
    if (!generated_) {
      generated_ = std::make_unique<test::TempDir>();
      std::vector<std::string> a;
      for (const auto& [name, args] : generated_rows()) {
        if (!a.empty()) a.push_back("--then");
        a.insert(a.end(), {generated_->file(std::string(name) + "/ck"), "--expect",
                           generated_->file(std::string(name) + "/expect.bin")});
        for (const auto& s : args) a.push_back(s.toStdString());
      }
      CKPTDOC_EXPECT_EXIT(test::run_python(test::script("fixtures/make_deepspeed_checkpoint.py"), a), 0);
    }
    const std::string ck = generated_->file(std::string(QTest::currentDataTag()) + "/ck");
    const std::string expect = generated_->file(std::string(QTest::currentDataTag()) + "/expect.bin");
    test::TempDir tmp;
    const auto j = inspect_json(ck);
    QVERIFY2(j["problems"].toArray().isEmpty(), QJsonDocument(j["problems"].toArray()).toJson().constData());
    // Both outputs are compared by one compare_state_dicts.py run (a torch start is seconds).
    std::vector<std::string> check;
    for (const char* ext : {"safetensors", "bin"}) {
      const std::string out = tmp.file(std::string("out.") + ext);
      auto r = test::run_cli({"export", ck, "-o", out});
      CKPTDOC_EXPECT_EXIT(r, 0);
      if (!check.empty()) check.push_back("--then");
      check.insert(check.end(), {out, expect});
    }
    const auto r = test::run_python(test::script("fixtures/compare_state_dicts.py"), check);
    CKPTDOC_EXPECT_EXIT(r, 0);
  }

  // --dtype float16/bfloat16 rounds each fp32 master exactly as torch's .to(dtype) does, through the compute
  // backend's downcast (--device auto and cpu give the same bytes).
  void exportDtypeMatchesTorchRounding() {
    test::TempDir tmp;
    const std::string ck = tmp.file("ck");
    CKPTDOC_EXPECT_EXIT(
        test::run_cli({"synth", ck, "--stage", "2", "--dtype", "bf16", "--dp", "3", "--params", "400000"}),
        0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ck, "-o", tmp.file("fp32.pt")}), 0);
    for (const char* dtype : {"bfloat16", "float16"}) {
      const std::string out = tmp.file(std::string(dtype) + ".safetensors");
      CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ck, "-o", out, "--dtype", dtype}), 0);
      const auto r = test::run_python(test::script("fixtures/compare_state_dicts.py"),
                                      {out, tmp.file("fp32.pt"), "--cast", dtype});
      CKPTDOC_EXPECT_EXIT(r, 0);
      const std::string cpu = tmp.file(std::string(dtype) + "-cpu.safetensors");
      CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ck, "-o", cpu, "--dtype", dtype, "--device", "cpu"}), 0);
      QCOMPARE(test::read_text(cpu), test::read_text(out));
    }
  }

  void exportOptions() {
    test::TempDir tmp;
    auto r = test::run_python(test::script("fixtures/make_deepspeed_checkpoint.py"),
                              {tmp.file("ck"), "--stage", "2", "--dp", "2", "--frozen", "--shared"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    // --dtype converts every tensor.
    r = test::run_cli({"export", tmp.file("ck"), "-o", tmp.file("bf.safetensors"), "--dtype", "bfloat16"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    for (const auto& e : SafetensorsFile::open(tmp.file("bf.safetensors")).entries)
      QCOMPARE(e.tensor.dtype, DType::BF16);
    // --exclude-frozen drops fc1.bias.
    r = test::run_cli({"export", tmp.file("ck"), "-o", tmp.file("nf.safetensors"), "--exclude-frozen"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto nf = output_hashes(tmp.file("nf.safetensors"));
    QVERIFY(!nf.count("fc1.bias"));
    QVERIFY(nf.count("head.weight"));
    // --source lp: the module's fp16 weights, byte for byte.
    r = test::run_cli({"export", tmp.file("ck"), "-o", tmp.file("lp.pt"), "--source", "lp"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto lp = TorchFile::open(tmp.file("lp.pt"));
    const auto model = TorchFile::open(tmp.file("ck/global_step5/mp_rank_00_model_states.pt"));
    const Value* module = model.root.get("module");
    for (const auto& [k, v] : lp.root.as_dict().items) {
      QCOMPARE(v.as_tensor().dtype, DType::F16);
      QCOMPARE(test::tensor_sha256(v.as_tensor()), test::tensor_sha256(module->at(k.as_str()).as_tensor()));
    }
    // --format overrides the extension; the torch output loads with weights_only=True.
    r = test::run_cli({"export", tmp.file("ck"), "-o", tmp.file("x.out"), "--format", "torch"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    r = compare(tmp.file("x.out"), tmp.file("bf.safetensors"));  // keys/dtypes differ -> exit 1, but it loads
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.find("bfloat16") != std::string::npos || r.err.find("dtype") != std::string::npos ||
                 r.err.find("float") != std::string::npos,
             r.err.c_str());
  }

  void exportHdf5() {
    test::TempDir tmp;
    const auto r = test::run_cli({"export", fixture_dir("zero2_fp16_ws2"), "-o", tmp.file("w.h5")});
    if (r.exit_code == 2) {
      QVERIFY2(r.err.find("HDF5") != std::string::npos, r.err.c_str());
      QSKIP("HDF5 writer not available in this build");
    }
    CKPTDOC_EXPECT_EXIT(r, 0);
    // Every tensor, read back by h5py, equals DeepSpeed's own zero_to_fp32.py output bit for bit.
    const auto c = test::run_python(
        test::script("fixtures/compare_hdf5_export.py"),
        {tmp.file("w.h5"), test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint.zero_to_fp32.bin"});
    CKPTDOC_EXPECT_EXIT(c, 0);
    QVERIFY2(c.out.rfind("OK ", 0) == 0, c.out.c_str());
  }

  // The export's NaN/Inf count (a fast check of whole blocks of 1024 values, element by element only where
  // one is found and in each tensor's tail) equals torch's own count of the written file, tensor by tensor,
  // in every output dtype: non-finite values are planted every 997th (NaN) and 1499th (Inf) master element of
  // rank 0, so they fall at the start, middle and end of blocks and in tails.
  void nonFiniteCountsEqualTorchs() {
    test::TempDir tmp;
    const std::string ck = copy_fixture(tmp);
    const std::string optim = ck + "/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt";
    TorchFile tf = TorchFile::open(optim);
    Value root = tf.root;
    size_t planted = 0;
    for (auto& g :
         root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut()) {
      const Tensor& t = g.as_tensor();
      std::vector<uint8_t> bytes = t.to_bytes();
      auto* f = reinterpret_cast<float*>(bytes.data());
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i % 997 == 3)
          f[i] = std::numeric_limits<float>::quiet_NaN();
        else if (i % 1499 == 1498)
          f[i] = -std::numeric_limits<float>::infinity();
        else
          continue;
        ++planted;
      }
      g = Value::tensor(Tensor::from_bytes(DType::F32, t.shape, std::move(bytes)));
    }
    write_torch_file(optim, root);
    QVERIFY(planted > 20);
    for (const char* dtype : {"float32", "float16", "bfloat16"}) {
      const std::string out = tmp.file(std::string(dtype) + ".pt");
      const auto r = test::run_cli({"export", ck, "-o", out, "--dtype", dtype, "--force", "--json"});
      CKPTDOC_EXPECT_EXIT(r, 0);
      const auto torch = test::run_python(test::source_dir() + "/tests/realds/count_nonfinite.py", {out});
      CKPTDOC_EXPECT_EXIT(torch, 0);
      std::map<std::string, std::pair<qint64, qint64>> expected, reported;
      const auto counts = QJsonDocument::fromJson(QByteArray::fromStdString(torch.out)).object();
      for (auto it = counts.begin(); it != counts.end(); ++it) {
        const auto o = it.value().toObject();
        if (o["nan"].toInteger() + o["inf"].toInteger() > 0)
          expected[it.key().toStdString()] = {o["nan"].toInteger(), o["inf"].toInteger()};
      }
      for (const auto& v :
           QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object()["non_finite"].toArray()) {
        const auto o = v.toObject();
        reported[o["name"].toString().toStdString()] = {o["nan"].toInteger(), o["inf"].toInteger()};
      }
      QVERIFY2(expected.size() >= 2, torch.out.c_str());
      QVERIFY2(reported == expected, (std::string(dtype) + ": " + r.out + "\ntorch: " + torch.out).c_str());
    }
  }

  void zero3LpExportIsRefused() {
    test::TempDir tmp;
    const auto r = test::run_cli(
        {"export", fixture_dir("zero3_fp16_ws2"), "-o", tmp.file("x.safetensors"), "--source", "lp"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("placeholders") != std::string::npos, r.err.c_str());
  }

  void inspectCliReportsDamage() {
    test::TempDir tmp;
    const auto ck_dir = copy_fixture(tmp);
    fs::remove(ck_dir + "/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt");
    auto r = test::run_cli({"inspect", "--json", ck_dir});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("\"rank-file-missing\"") != std::string::npos);
    r = test::run_cli({"inspect", ck_dir});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("rank-file-missing") != std::string::npos);
    r = test::run_cli({"export", ck_dir, "-o", tmp.file("out.safetensors")});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("dp rank 0") != std::string::npos, r.err.c_str());
    QVERIFY(!fs::exists(tmp.file("out.safetensors")));
    r = test::run_cli({"inspect", tmp.file("nothing-here")});
    CKPTDOC_EXPECT_EXIT(r, 2);
  }
};

CKPTDOC_TEST_MAIN(TestDeepspeedExport)
#include "test_deepspeed_export.moc"
