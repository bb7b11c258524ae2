// A verdict says what it rests on (issue "Never say healthy without looking"): pointed one folder too high,
// at a folder holding a checkpoint beside Hugging Face weights, or at a ZeRO-3 checkpoint (whose files hold
// no 16-bit weights), ckptdoc said "No problems found. The fp32 masters match the weights" after comparing
// nothing. Each case on a copy of a committed real DeepSpeed checkpoint.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>
#include <fstream>

#include "ckptdoc/format/torch_file.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

struct Diagnosis {
  test::RunResult run;
  QJsonObject json;
  QStringList codes() const {
    QStringList c;
    for (const auto& f : json["findings"].toArray()) c << f.toObject()["code"].toString();
    return c;
  }
  QJsonObject verdict() const { return json["verdict"].toObject(); }
};

Diagnosis diagnose(std::vector<std::string> args) {
  args.insert(args.begin(), "diagnose");
  args.push_back("--json");
  Diagnosis d;
  d.run = test::run_cli(args);
  d.json = QJsonDocument::fromJson(QByteArray::fromStdString(d.run.out)).object();
  return d;
}

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

class TestTruthfulVerdicts : public QObject {
  Q_OBJECT

 private slots:
  // `diagnose zero2_fp16_ws2/` (checkpoint/ beside checkpoint.zero_to_fp32.bin) read the .bin as a "Hugging
  // Face model folder" and said all is well. Now it opens the checkpoint below and says so; the verdict
  // counts the masters it compared.
  void oneFolderTooHighOpensTheCheckpointBelowAndSaysSo() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2"), run);
    auto d = diagnose({run});
    CKPTDOC_EXPECT_EXIT(d.run, 0);
    QVERIFY2(d.codes().contains("opened-checkpoint-below"), d.run.out.c_str());
    QCOMPARE(d.json["tag"].toString(), QString("global_step5"));
    QVERIFY(d.verdict()["masters_compared"].toInt() > 0);
    QCOMPARE(d.verdict()["kind"].toString(), QString("clean"));
    // The text report: the verdict with what it rests on.
    const auto text = test::run_cli({"diagnose", run});
    CKPTDOC_EXPECT_EXIT(text, 0);
    QVERIFY2(mentions(text.out, "No problems found. Checked: the fp32 masters of"), text.out.c_str());
    QVERIFY2(mentions(text.out, run + " holds no checkpoint itself"), text.out.c_str());

    // Two levels higher (run1/checkpoints/…) still finds it; two checkpoints below are listed, not guessed.
    const std::string top = dir.file("top");
    fs::create_directories(top);
    fs::rename(run, top + "/run1");
    CKPTDOC_EXPECT_EXIT(diagnose({top}).run, 0);
    test::copy_tree(top + "/run1", top + "/run2");
    const auto two = test::run_cli({"diagnose", top});
    CKPTDOC_EXPECT_EXIT(two, 2);
    QVERIFY2(mentions(two.err, top + "/run1/checkpoint") && mentions(two.err, top + "/run2/checkpoint"),
             two.err.c_str());
  }

  // A DeepSpeed folder beside model.safetensors: ckptdoc read only the weights and said all is well. Now it
  // names both and asks which; each opens as what it is.
  void aCheckpointBesideWeightsIsNotGuessed() {
    test::TempDir dir;
    const std::string parent = dir.file("parent");
    fs::create_directories(parent);
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", parent + "/ds_ckpt");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", parent + "/ds_ckpt", "-o", parent + "/model.safetensors"}),
                        0);
    const auto r = test::run_cli({"diagnose", parent});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, parent + "/ds_ckpt") && mentions(r.err, "model.safetensors"), r.err.c_str());
    CKPTDOC_EXPECT_EXIT(diagnose({parent + "/ds_ckpt"}).run, 0);
    CKPTDOC_EXPECT_EXIT(diagnose({parent + "/model.safetensors"}).run, 0);

    // A lone *.bin is not a Hugging Face folder: a folder with only zero_to_fp32.py's output says what it
    // holds.
    const std::string bins = dir.file("bins");
    fs::create_directories(bins);
    fs::copy_file(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint.zero_to_fp32.bin",
                  bins + "/weights.bin");
    const auto b = test::run_cli({"diagnose", bins});
    CKPTDOC_EXPECT_EXIT(b, 2);
    QVERIFY2(!mentions(b.out, "No problems found"), b.out.c_str());
  }

  // ZeRO-3 files hold no 16-bit weights: the masters are compared with nothing, and the verdict says so
  // instead of "No problems found. The fp32 masters match the weights".
  void zero3AloneIsNeverCalledHealthy() {
    const auto d = diagnose({test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint"});
    CKPTDOC_EXPECT_EXIT(d.run, 0);
    QCOMPARE(d.verdict()["kind"].toString(), QString("nothing-compared"));
    QCOMPARE(d.verdict()["masters_compared"].toInt(), 0);
    QVERIFY(d.verdict()["not_checked"].toArray().size() > 0);
    const auto text = test::run_cli({"diagnose", test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint"});
    QVERIFY2(!mentions(text.out, "No problems found"), text.out.c_str());
    QVERIFY2(mentions(text.out, "ZeRO-3: the fp32 partitions are the only copy"), text.out.c_str());
  }

  // --lp-source (or 16-bit weights saved beside the checkpoint) compares the fp32 partitions with them:
  // DeepSpeed's own consolidated weights rounded to fp16 match bit for bit; a save with one tensor off is
  // named.
  void zero3ComparedWithSixteenBitWeightsSavedElsewhere() {
    test::TempDir dir;
    const std::string fixture = test::deepspeed_fixture("zero3_fp16_ws2");
    const std::string good = dir.file("good.bin"), stale = dir.file("stale.bin");
    auto recast = [&](const std::string& out, std::vector<std::string> extra) {
      std::vector<std::string> args{fixture + "/checkpoint.zero_to_fp32.bin", out, "--dtype", "float16"};
      args.insert(args.end(), extra.begin(), extra.end());
      const auto r = test::run_python(test::script("fixtures/recast_state_dict.py"), args);
      QVERIFY2(r.exit_code == 0, r.err.c_str());
    };
    recast(good, {});
    recast(stale, {"--scale", "fc2.weight=1.01"});

    auto d = diagnose({fixture + "/checkpoint", "--lp-source", good});
    CKPTDOC_EXPECT_EXIT(d.run, 0);
    QCOMPARE(d.verdict()["kind"].toString(), QString("clean"));
    QVERIFY(d.verdict()["masters_compared"].toInt() >= 8);
    QVERIFY(d.codes().contains("lp-source-compared"));

    d = diagnose({fixture + "/checkpoint", "--lp-source", stale});
    CKPTDOC_EXPECT_EXIT(d.run, 1);
    QVERIFY2(d.codes().contains("lp-source-mismatch"), d.run.out.c_str());
    for (const auto& f : d.json["findings"].toArray())
      if (f.toObject()["code"].toString() == "lp-source-mismatch")
        QCOMPARE(f.toObject()["params"].toArray(), QJsonArray{"fc2.weight"});

    // The same save beside the checkpoint (where stage3_gather_16bit_weights_on_model_save puts it) is used
    // without being asked for.
    const std::string ck = dir.file("ck");
    test::copy_tree(fixture + "/checkpoint", ck);
    fs::copy_file(stale, ck + "/pytorch_model.bin");
    d = diagnose({ck});
    CKPTDOC_EXPECT_EXIT(d.run, 1);
    QVERIFY2(d.codes().contains("lp-source-mismatch"), d.run.out.c_str());

    // Not ZeRO-3: the flag is refused, naming it.
    const auto r = test::run_cli(
        {"diagnose", test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", "--lp-source", good});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, "--lp-source"), r.err.c_str());
  }

  // `repair demo --reset-optimizer` wrote OUT and only then said "still has errors". The plan says before
  // writing which error stays and what clears it, in a dry run too.
  void aPlanSaysWhichErrorItLeaves() {
    test::TempDir dir;
    const std::string demo = dir.file("demo");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", demo}), 0);
    auto r = test::run_cli({"repair", demo, "-o", dir.file("out"), "--reset-optimizer", "--dry-run"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(
        mentions(r.out, "fp32-master-mismatch (error) stays") && mentions(r.out, "--refresh-fp32 clears it"),
        r.out.c_str());
    QVERIFY(!fs::exists(dir.file("out")));
    r = test::run_cli({"repair", demo, "-o", dir.file("out"), "--refresh-fp32", "--dry-run"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(!mentions(r.out, "stays"), r.out.c_str());
  }

  // DeepSpeed 0.18.4 (bf16, ZeRO stage 0) saved no optimizer state (`optimizer: None`, no optimizer file)
  // although the run trained with AdamW: "Nothing was checked", exit 0, and no word on why. The warning names
  // the version's bug and the resume that keeps the weights. Older checkpoints with optimizer state never get
  // it.
  void anOptimizerStateNeverSavedIsNamed() {
    auto d = diagnose({test::deepspeed_fixture("v0184_bf16_z0_ws2") + "/checkpoint"});
    CKPTDOC_EXPECT_EXIT(d.run, 0);
    QCOMPARE(d.codes(), QStringList{"optimizer-state-not-saved"});
    const auto f = d.json["findings"].toArray()[0].toObject();
    QCOMPARE(f["severity"].toString(), QString("warning"));
    const std::string message = f["message"].toString().toStdString();
    for (const char* want : {"AdamW", "DeepSpeed 0.18.4", "#7571", "load_module_only=True"})
      QVERIFY2(mentions(message, want), message.c_str());
    QCOMPARE(d.verdict()["kind"].toString(), QString("problems"));
    QCOMPARE(d.verdict()["masters_compared"].toInt(), 0);
    for (const char* older : {"zero2_bf16_ws2", "bf16opt_zero1_ws2"})
      QVERIFY(!diagnose({test::deepspeed_fixture(older) + "/checkpoint"})
                   .codes()
                   .contains("optimizer-state-not-saved"));
  }

  // The same checkpoint without optimizer state: `inspect` said "0 trainable (0 elements) in 0 groups" and
  // `diagnose` read none of the bf16 weights its model file holds, so a NaN there went unseen. Now the
  // module's tensors are read: the same names and shapes as torch listed for the harness's model A
  // (zero2_bf16_ws2's reference, written by DeepSpeed 0.12.6), and a NaN written into a copy is an error
  // naming tensor and file.
  void theWeightsOfACheckpointWithoutOptimizerStateAreRead() {
    QFile ref(
        QString::fromStdString(test::deepspeed_fixture("zero2_bf16_ws2") + "/checkpoint.reference.json"));
    QVERIFY(ref.open(QIODevice::ReadOnly));
    const QJsonObject module =
        QJsonDocument::fromJson(ref.readAll()).object()["model_states"].toObject()["module"].toObject();
    QVERIFY(module.size() > 1);
    const std::string fixture = test::deepspeed_fixture("v0184_bf16_z0_ws2") + "/checkpoint";

    auto d = diagnose({fixture});
    CKPTDOC_EXPECT_EXIT(d.run, 0);
    QMap<QString, QJsonArray> shapes;
    for (const auto& p : d.json["params"].toArray()) {
      const auto o = p.toObject();
      shapes[o["name"].toString()] = o["shape"].toArray();
      QCOMPARE(o["lp_dtype"].toString(), QString("bfloat16"));
    }
    QCOMPARE(QStringList(shapes.keys()), QStringList(module.keys()));
    for (auto it = module.begin(); it != module.end(); ++it)
      QCOMPARE(shapes[it.key()], it.value().toObject()["shape"].toArray());
    QCOMPARE(d.verdict()["tensors_scanned"].toInt(), int(module.size()));
    const std::string basis = d.verdict()["basis"].toString().toStdString();
    QVERIFY2(mentions(basis, "bf16 weights of " + std::to_string(module.size()) + " module tensors"),
             basis.c_str());
    const auto inspected = test::run_cli({"inspect", fixture});
    CKPTDOC_EXPECT_EXIT(inspected, 0);
    QVERIFY2(mentions(inspected.out, "the module holds " + std::to_string(module.size()) + " tensors") &&
                 !mentions(inspected.out, "0 trainable"),
             inspected.out.c_str());

    // One bf16 NaN (0x7fc0) in the middle of fc1.weight, in a copy of the model file.
    test::TempDir dir;
    const std::string ck = dir.file("checkpoint");
    test::copy_tree(fixture, ck);
    const std::string model = ck + "/global_step5/mp_rank_00_model_states.pt";
    uint64_t at = 0;
    {
      const TorchFile f = TorchFile::open(model);
      const Value* w = f.root.get("module")->get("fc1.weight");
      QVERIFY(w && w->is_tensor());
      const Tensor& t = w->as_tensor();
      at = t.storage->file_offset + static_cast<uint64_t>(t.storage_offset + t.numel() / 2) * 2;
    }
    {
      std::fstream out(model, std::ios::in | std::ios::out | std::ios::binary);
      out.seekp(static_cast<std::streamoff>(at));
      out.write("\xc0\x7f", 2);
      QVERIFY(out.good());
    }
    d = diagnose({ck});
    CKPTDOC_EXPECT_EXIT(d.run, 1);
    QVERIFY2(d.codes().contains("nonfinite-values"), d.run.out.c_str());
    for (const auto& f : d.json["findings"].toArray()) {
      const auto o = f.toObject();
      if (o["code"].toString() != "nonfinite-values") continue;
      QCOMPARE(o["params"].toArray(), QJsonArray{"fc1.weight"});
      QVERIFY2(mentions(o["message"].toString().toStdString(), "(in mp_rank_00_model_states.pt)"),
               qPrintable(o["message"].toString()));
    }
  }
};

CKPTDOC_TEST_MAIN(TestTruthfulVerdicts)
#include "test_truthful_verdicts.moc"
