// Legacy Megatron-LM checkpoints (#28): iter_NNNNNNN/mp_rank_TT/model_optim_rng.pt written by Megatron-LM's
// own megatron.training.checkpointing.save_checkpoint with ckpt_format "torch" (megatron.training 0.18.0,
// megatron_legacy_train.py; realds.py entries v019_megatron_legacy_*): a tiny bf16 GPTModel with the
// non-distributed Float16OptimizerWithFloat16Params, whose fp32 mains are optimizer.fp32_from_fp16_params.
// The truth about the mains is Megatron-LM's own resume (megatron_legacy_load_check.py: load_checkpoint, then
// each main against its loaded weight, and megatron-core's own order of them); the truth about the export is
// torch's load of the rank files merged along the axes megatron-core declares on its params
// (megatron_legacy_export_check.py), and the views' layout map is judged the same way, key, box and byte
// range (megatron_legacy_layout_check.py). main refused these folders ("ckptdoc does not read it yet", exit
// 2). repair --refresh-fp32 is judged by Megatron-LM's load_checkpoint of its output and one step.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/registry.h"
#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kMcore = "0.18.0";

// Megatron-LM's own resume of entry `e`'s save (world = its tp): mains_equal_weights / mains_differ
// ("tp<r>:<name>") and mains_order ("tp<r>:<g>.<i>" -> name). Empty when the judge failed.
QJsonObject megatron_truth(const realds::Entry& e, const test::TempDir& dir,
                           const std::vector<std::string>& extra = {}) {
  const auto out = dir.file("truth.json");
  std::vector<std::string> args{test::source_dir() + "/tests/realds/megatron_legacy_load_check.py",
                                "--ckpt",
                                e.save_dir,
                                "--tp",
                                std::to_string(e.tp),
                                "--pp",
                                std::to_string(e.pp),
                                "--json",
                                out};
  if (e.spec["optimizer"].toString() == "distributed")
    args.insert(args.end(), {"--optimizer", "distributed"});
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = realds::launch_with_megatron_core(args, e.world, kMcore, dir.file("truth-logs"));
  if (r.exit_code != 0) {
    qWarning("%s", realds::describe(r).c_str());
    return {};
  }
  return realds::parse(test::read_text(out));
}

QJsonObject diagnose_json(const std::string& path, int want_exit) {
  const auto r = test::run_cli({"diagnose", path, "--json"});
  if (r.exit_code != want_exit) {
    qWarning("diagnose exit %d, wanted %d: %s", r.exit_code, want_exit, realds::describe(r).c_str());
    return {};
  }
  return realds::parse(r.out);
}

// A storage map as megatron_legacy_layout_check.py reads it.
QJsonObject map_json(const sources::StorageMap& map) {
  const auto ints = [](const std::vector<int64_t>& v) {
    QJsonArray a;
    for (const int64_t n : v) a.append(static_cast<qint64>(n));
    return a;
  };
  QJsonArray keys;
  for (const auto& k : map.keys) {
    QJsonArray chunks;
    for (const auto& c : k.chunks)
      chunks.append(QJsonObject{{"file", QString::fromStdString(c.file)},
                                {"offsets", ints(c.offsets)},
                                {"sizes", ints(c.sizes)},
                                {"offset", static_cast<qint64>(c.offset)},
                                {"length", static_cast<qint64>(c.length)}});
    keys.append(QJsonObject{{"key", QString::fromStdString(k.key)},
                            {"dtype", QString::fromStdString(k.dtype)},
                            {"shape", ints(k.shape)},
                            {"chunks", chunks}});
  }
  return QJsonObject{{"path", QString::fromStdString(map.path)}, {"keys", keys}};
}

std::vector<std::string> problem_codes(const QJsonObject& report) {
  std::vector<std::string> out;
  for (const auto& p : report["problems"].toArray())
    out.push_back(p.toObject()["code"].toString().toStdString());
  return out;
}

std::set<QString> strings(const QJsonArray& a) {
  std::set<QString> out;
  for (const auto& v : a) out.insert(v.toString());
  return out;
}

// ckptdoc's mains as "tp<r>:<name>", split by whether every element rounds exactly to the weight; and
// whether each (group, index) ckptdoc placed is the param megatron-core's own optimizer holds there.
struct OurMains {
  std::set<QString> equal, differ;
  int placed_as_megatron = 0, placed_otherwise = 0;
};

OurMains our_mains(const QJsonObject& report, const QJsonObject& truth) {
  OurMains o;
  const auto order = truth["mains_order"].toObject();
  for (const auto& v : report["main_params"].toObject()["mains"].toArray()) {
    const auto m = v.toObject();
    const QString tp = "tp" + QString::number(m["tp"].toInt());
    const QString name = tp + ":" + m["name"].toString();
    (m["exact"].toDouble() == m["count"].toDouble() && m["count"].toDouble() > 0 ? o.equal : o.differ)
        .insert(name);
    // pipeline saves: ckptdoc's names and megatron-core's order are both qualified by stage ("pp<s>:")
    const QString stage =
        m["name"].toString().startsWith("pp") ? "pp" + QString::number(m["pp"].toInt()) + ":" : "";
    const QString slot =
        tp + ":" + stage + QString::number(m["group"].toInt()) + "." + QString::number(m["index"].toInt());
    (order[slot].toString() == m["name"].toString() ? o.placed_as_megatron : o.placed_otherwise) += 1;
  }
  return o;
}

}  // namespace

class TestRealdsMegatronLegacy : public QObject {
  Q_OBJECT

 private slots:
  // Healthy saves (2 steps at tp 1 and tp 2, and Megatron-LM 0.18.0's --finetune load of tp 2, which calls
  // reload_model_params): Megatron-LM's own resume finds every main equal to its weight; ckptdoc compares
  // every one of them (29 params per rank), each placed where megatron-core's optimizer holds it, all equal,
  // and reports no fp32-master finding, exit 0.
  void healthyMainsAreAllComparedAndEqual_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<int>("mains");
    QTest::newRow("tp1") << "v019_megatron_legacy_tp1" << 29;
    QTest::newRow("tp2") << "v019_megatron_legacy_tp2" << 58;
    QTest::newRow("tp2_finetune") << "v019_megatron_legacy_tp2_finetune" << 58;
    QTest::newRow("pp2") << "v019_megatron_legacy_pp2" << 29;
    QTest::newRow("distopt_dp2") << "v019_megatron_legacy_distopt_dp2" << 29;
  }

  void healthyMainsAreAllComparedAndEqual() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(int, mains);
    const auto e = realds::checkpoint(entry.toStdString());
    test::TempDir dir;
    const auto truth = megatron_truth(e, dir);
    const bool distopt = e.spec["optimizer"].toString() == "distributed";
    QCOMPARE(truth["optimizer"].toString(),
             QString(distopt ? "DistributedOptimizer" : "Float16OptimizerWithFloat16Params"));
    QCOMPARE(truth["mains_equal_weights"].toArray().size(), mains);
    QVERIFY(truth["mains_differ"].toArray().isEmpty());

    const auto report = diagnose_json(e.save_dir, 0);
    QCOMPARE(report["format"].toString(), QString("megatron-legacy"));
    QVERIFY2(problem_codes(report).empty(), qPrintable(report["verdict"].toObject()["text"].toString()));
    QVERIFY(report["verdict"].toObject()["clean"].toBool());
    const auto ours = our_mains(report, truth);
    // distrib_optim.pt keeps no per-param order to check against: there the placement is judged by the values
    // (every main rounds exactly to the weight ckptdoc places it on, as Megatron-LM's resume finds)
    QCOMPARE(ours.placed_as_megatron, distopt ? 0 : mains);
    QCOMPARE(ours.placed_otherwise, distopt ? mains : 0);
    QCOMPARE(ours.equal, strings(truth["mains_equal_weights"].toArray()));
    QVERIFY(ours.differ.empty());
    QVERIFY(report["main_params"].toObject()["not_compared"].toArray().isEmpty());
    const auto said = report["verdict"].toObject()["text"].toString();
    QVERIFY2(said.startsWith("No problems found.") &&
                 said.contains(
                     "fp32 main params: " + QString::number(mains) + " mains of 29 params (" +
                     (distopt ? "distrib_optim.pt's \"param\" state" : "optimizer.fp32_from_fp16_params")),
             qPrintable(said));
  }

  // The stale saves (Megatron-LM's --finetune or --no-load-optim load without reload_model_params, #174):
  // Megatron-LM's own resume finds every main unequal to its weight; ckptdoc raises the torch_dist source's
  // fp32-master-mismatch (error, exit 1) naming all 29 params, and its per-rank verdicts are Megatron's.
  void staleMainsAreNamedAsMegatronFindsThem_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<int>("mains");
    QTest::newRow("tp2_stale") << "v019_megatron_legacy_tp2_stale" << 58;
    QTest::newRow("tp1_stale") << "v019_megatron_legacy_tp1_stale" << 29;
    QTest::newRow("pp2_stale") << "v019_megatron_legacy_pp2_stale" << 29;
    QTest::newRow("distopt_dp2_stale") << "v019_megatron_legacy_distopt_dp2_stale" << 29;
    QTest::newRow("tp2_no_load_optim_stale") << "v019_megatron_legacy_tp2_no_load_optim_stale" << 58;
  }

  void staleMainsAreNamedAsMegatronFindsThem() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(int, mains);
    const auto e = realds::checkpoint(entry.toStdString());
    test::TempDir dir;
    const auto truth = megatron_truth(e, dir);
    const bool distopt = e.spec["optimizer"].toString() == "distributed";
    QCOMPARE(truth["mains_differ"].toArray().size(), mains);
    QVERIFY(truth["mains_equal_weights"].toArray().isEmpty());

    const auto report = diagnose_json(e.save_dir, 1);
    QCOMPARE(problem_codes(report), std::vector<std::string>{"fp32-master-mismatch"});
    const auto p = report["problems"].toArray()[0].toObject();
    QCOMPARE(p["severity"].toString(), QString("error"));
    QVERIFY(p["file"].toString().endsWith(distopt ? "/distrib_optim.pt" : "/model_optim_rng.pt"));
    const auto message = p["message"].toString();
    QVERIFY2(message.contains(QString("The fp32 main params (") +
                              (distopt ? "the \"param\" state of distrib_optim.pt"
                                       : "optimizer.fp32_from_fp16_params in model_optim_rng.pt") +
                              ") of 29 of 29 trainable params do not match their bf16 weights") &&
                 message.contains("reload_model_params"),
             qPrintable(message));
    std::set<QString> truth_names;
    for (const auto& n : truth["mains_differ"].toArray()) truth_names.insert(n.toString().section(':', 1));
    QCOMPARE(strings(p["params"].toArray()), truth_names);
    const auto ours = our_mains(report, truth);
    QCOMPARE(ours.differ, strings(truth["mains_differ"].toArray()));
    QVERIFY(ours.equal.empty());
    QCOMPARE(ours.placed_as_megatron, distopt ? 0 : mains);
    QVERIFY(!report["verdict"].toObject()["clean"].toBool());
  }

  // export writes every model weight: at tp 1 the rank file's tensors, at tp 2 each merged along the axis
  // megatron-core declares on its param (partition_dim) or, replicated, taken once; at pp 2 the stages
  // joined, each stage's layers (numbered from 0 in its file) under megatron-core's own global numbers (its
  // TransformerLayer.layer_number: stage 0 holds layer 0, stage 1 layer 1). The judge compares each bit for
  // bit with torch's load of the rank files. main refused these folders, and pipeline saves after that.
  void exportEqualsTorchLoadOfTheRankFiles_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<QString>("how");
    QTest::newRow("tp1") << "v019_megatron_legacy_tp1"
                         << "from mp_rank_00/model_optim_rng.pt";
    QTest::newRow("tp2") << "v019_megatron_legacy_tp2"
                         << "14 merged over 2 tensor-parallel ranks";
    QTest::newRow("pp2")
        << "v019_megatron_legacy_pp2"
        << "2 pipeline stages joined, 12 tensors' layer numbers offset into the global numbering";
  }

  void exportEqualsTorchLoadOfTheRankFiles() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(QString, how);
    const auto e = realds::checkpoint(entry.toStdString());
    test::TempDir dir;
    const auto out = dir.file("model.safetensors");
    const auto r = test::run_cli({"export", e.save_dir, "-o", out});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("wrote 29 tensors") != std::string::npos, r.out.c_str());
    QVERIFY2(r.out.find(how.toStdString()) != std::string::npos, r.out.c_str());
    const auto check = realds::launch_with_megatron_core(
        {test::source_dir() + "/tests/realds/megatron_legacy_export_check.py", "--ckpt", e.save_dir, "--tp",
         std::to_string(e.tp), "--pp", std::to_string(e.pp), "--export", out, "--json",
         dir.file("export.json")},
        e.tp * e.pp, kMcore, dir.file("logs"));
    QVERIFY2(check.exit_code == 0, realds::describe(check).c_str());
    const auto j = realds::parse(test::read_text(dir.file("export.json")));
    QCOMPARE(j["expected"].toInt(), 29);
    QCOMPARE(j["equal"].toArray().size(), 29);
    QVERIFY(j["extra"].toArray().isEmpty());
    if (e.pp == 2)
      QCOMPARE(j["layers"].toObject(), (QJsonObject{{"0", QJsonArray{0}}, {"1", QJsonArray{1}}}));
  }

  // A pipeline save missing its last stage's folder is refused by export, exit 2, naming the folder and the
  // sizes its args say, nothing written (main refused every pipeline save, for another reason).
  void exportRefusesAPipelineSaveWithoutAStage() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_megatron_legacy_pp2");
    test::TempDir dir;
    const auto copy = realds::copy_of(e, dir);
    std::filesystem::remove_all(copy + "/iter_0000002/mp_rank_00_001");
    const auto out = dir.file("model.safetensors");
    const auto r = test::run_cli({"export", copy, "-o", out});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("iter_0000002: holds 1 mp_rank_* folders, its args say tensor 1 x pipeline 2") !=
                 std::string::npos,
             r.err.c_str());
    QVERIFY(!std::filesystem::exists(out));
  }

  // The export judge can fail: one byte of the export's last tensor changed is one tensor that differs.
  void aChangedByteIsNamedByTheExportJudge() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_megatron_legacy_tp2");
    test::TempDir dir;
    const auto out = dir.file("model.safetensors");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", out}), 0);
    const auto size = std::filesystem::file_size(out);
    {
      std::fstream f(out, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(size - 1));
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x01);
      f.seekp(static_cast<std::streamoff>(size - 1));
      f.write(&c, 1);
    }
    const auto check = realds::launch_with_megatron_core(
        {test::source_dir() + "/tests/realds/megatron_legacy_export_check.py", "--ckpt", e.save_dir, "--tp",
         "2", "--export", out, "--json", dir.file("export.json")},
        2, kMcore, dir.file("logs"));
    QVERIFY(check.exit_code != 0);
    const auto j = realds::parse(test::read_text(dir.file("export.json")));
    QCOMPARE(j["differ"].toArray().size(), 1);
    QCOMPARE(j["equal"].toArray().size(), 28);
  }

  // A copy whose mp_rank_01/model_optim_rng.pt is cut short: diagnose names it (rank-file-truncated, exit 1)
  // and still judges the other rank; export refuses it by name (exit 2) and writes nothing; the copy is not
  // written.
  void aTruncatedRankFileIsNamed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_megatron_legacy_tp2");
    test::TempDir dir;
    const auto copy = realds::copy_of(e, dir);
    const auto file = copy + "/iter_0000002/mp_rank_01/model_optim_rng.pt";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
    const auto before = test::read_text(file);

    const auto report = diagnose_json(copy, 1);
    QCOMPARE(problem_codes(report), std::vector<std::string>{"rank-file-truncated"});
    const auto p = report["problems"].toArray()[0].toObject();
    QCOMPARE(p["file"].toString(), QString("mp_rank_01/model_optim_rng.pt"));
    QVERIFY(!report["verdict"].toObject()["clean"].toBool());
    QCOMPARE(report["main_params"].toObject()["mains"].toArray().size(), 29);  // mp_rank_00's, all compared
    bool said = false;
    for (const auto& n : report["verdict"].toObject()["not_checked"].toArray())
      said = said || n.toString().startsWith("fp32 main params not compared: mp_rank_01/model_optim_rng.pt");
    QVERIFY(said);

    const auto out = dir.file("out.safetensors");
    const auto r = test::run_cli({"export", copy, "-o", out});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("[truncated]") != std::string::npos &&
                 r.err.find("mp_rank_01/model_optim_rng.pt") != std::string::npos,
             r.err.c_str());
    QVERIFY(!std::filesystem::exists(out));
    QCOMPARE(test::read_text(file), before);
  }

  // A copy whose distrib_optim.pt is cut short: diagnose names it (optimizer-file-unreadable, exit 1) and
  // says its mains were not compared; export still writes the weights (they are in model_optim_rng.pt);
  // repair
  // --refresh-fp32 refuses by name (exit 2) and writes nothing.
  void aTruncatedDistribOptimIsNamed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_megatron_legacy_distopt_dp2");
    test::TempDir dir;
    const auto copy = realds::copy_of(e, dir);
    const auto file = copy + "/iter_0000002/mp_rank_00/distrib_optim.pt";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);

    const auto report = diagnose_json(copy, 1);
    QCOMPARE(problem_codes(report), std::vector<std::string>{"optimizer-file-unreadable"});
    QCOMPARE(report["problems"].toArray()[0].toObject()["file"].toString(),
             QString("mp_rank_00/distrib_optim.pt"));
    QVERIFY(report["main_params"].toObject()["mains"].toArray().isEmpty());
    bool said = false;
    for (const auto& n : report["verdict"].toObject()["not_checked"].toArray())
      said = said ||
             n.toString().startsWith("fp32 main params not compared: mp_rank_00/distrib_optim.pt: not read");
    QVERIFY(said);

    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", copy, "-o", dir.file("model.safetensors")}), 0);
    const auto out = dir.file("refreshed");
    const auto r = test::run_cli({"repair", copy, "-o", out, "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("mp_rank_00/distrib_optim.pt") != std::string::npos, r.err.c_str());
    QVERIFY(!std::filesystem::exists(out));
  }

  // NaN that megatron-core's own Adam wrote (one NaN gradient element of
  // decoder.layers.1.mlp.linear_fc2.weight on each tensor rank): diagnose names, per rank file, the weight,
  // its main and both moments by param (exit 1), and raises no fp32-master finding (the NaN main rounds to
  // the NaN weight, as Megatron-LM's resume finds too); export --strict refuses the weight by name and writes
  // nothing, a plain export says so.
  void nanWrittenByMegatronIsNamedByParam() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_megatron_legacy_tp2_nan");
    const QString param = "decoder.layers.1.mlp.linear_fc2.weight";
    test::TempDir dir;
    const auto truth = megatron_truth(e, dir);
    QCOMPARE(truth["mains_equal_weights"].toArray().size(), 58);

    const auto report = diagnose_json(e.save_dir, 1);
    QCOMPARE(problem_codes(report), (std::vector<std::string>{"nonfinite-values", "nonfinite-values"}));
    for (int i = 0; i < 2; ++i) {
      const auto p = report["problems"].toArray()[i].toObject();
      QCOMPARE(p["file"].toString(), QString("mp_rank_0%1/model_optim_rng.pt").arg(i));
      const auto m = p["message"].toString();
      QVERIFY2(m.contains("4 tensors hold NaN or Inf: " + param + " (1 NaN") &&
                   m.contains("optimizer.fp32_from_fp16_params[0][9] (" + param + ")") &&
                   m.contains("exp_avg (" + param + ")") && m.contains("exp_avg_sq (" + param + ")"),
               qPrintable(m));
    }
    QCOMPARE(our_mains(report, truth).equal, strings(truth["mains_equal_weights"].toArray()));

    const auto strict =
        test::run_cli({"export", e.save_dir, "-o", dir.file("strict.safetensors"), "--strict"});
    CKPTDOC_EXPECT_EXIT(strict, 2);
    QVERIFY2(strict.err.find(param.toStdString()) != std::string::npos, strict.err.c_str());
    QVERIFY(!std::filesystem::exists(dir.file("strict.safetensors")));
    const auto plain = test::run_cli({"export", e.save_dir, "-o", dir.file("plain.safetensors")});
    CKPTDOC_EXPECT_EXIT(plain, 0);
    QVERIFY2(plain.err.find(param.toStdString() + ": 2 NaN") != std::string::npos, plain.err.c_str());
  }

  // repair --refresh-fp32 of a stale save writes a new folder in which each rank file differs from the
  // input's only in the mains' storage records (fp32_from_fp16_params: one per main, 29 per file;
  // distrib_optim.pt: its one coalesced "param" record, model_optim_rng.pt untouched), the pickles and every
  // other record and file the input's bytes, the input untouched; ckptdoc's diagnosis of it is clean, and
  // Megatron-LM's own load_checkpoint of it finds every main equal to its weight and takes a step. main
  // refused to repair a legacy Megatron folder.
  void repairRefreshesTheStaleMains_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<QStringList>("files");  // the files whose records change
    QTest::addColumn<int>("records");        // records changed in each
    QTest::addColumn<QStringList>("same");   // files kept byte for byte
    QTest::addColumn<QString>("said");
    QTest::addColumn<int>("mains");
    QTest::newRow("tp2_stale") << "v019_megatron_legacy_tp2_stale"
                               << QStringList{"mp_rank_00/model_optim_rng.pt",
                                              "mp_rank_01/model_optim_rng.pt"}
                               << 29 << QStringList{}
                               << "Refreshed the fp32 main params of 29 params (58 mains of "
                                  "optimizer.fp32_from_fp16_params in 2 rank files)"
                               << 58;
    QTest::newRow("distopt_dp2_stale")
        << "v019_megatron_legacy_distopt_dp2_stale" << QStringList{"mp_rank_00/distrib_optim.pt"} << 1
        << QStringList{"mp_rank_00/model_optim_rng.pt"}
        << "Refreshed the fp32 main params of 29 params (29 mains of distrib_optim.pt's \"param\" state in 1 "
           "rank "
           "folder)"
        << 29;
  }

  void repairRefreshesTheStaleMains() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(QStringList, files);
    QFETCH(int, records);
    QFETCH(QStringList, same);
    QFETCH(QString, said);
    QFETCH(int, mains);
    const auto e = realds::checkpoint(entry.toStdString());
    const auto iter = e.save_dir + "/iter_0000000";
    std::map<std::string, std::string> before;
    for (const auto& f : files + same)
      before[f.toStdString()] = test::read_text(iter + "/" + f.toStdString());
    test::TempDir dir;
    const auto out = dir.file("refreshed");
    const auto r = test::run_cli({"repair", e.save_dir, "-o", out, "--refresh-fp32"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find(said.toStdString()) != std::string::npos, r.out.c_str());
    for (const auto& [f, bytes] : before)
      QVERIFY(test::read_text(iter + "/" + f) == bytes);  // input untouched
    for (const auto& f : same)
      QVERIFY(test::read_text(out + "/iter_0000000/" + f.toStdString()) == before[f.toStdString()]);
    QCOMPARE(test::read_text(out + "/latest_checkpointed_iteration.txt"),
             test::read_text(e.save_dir + "/latest_checkpointed_iteration.txt"));
    for (const auto& name : files) {
      const std::string f = name.toStdString();
      const ZipReader in(MappedFile::open(iter + "/" + f));
      const ZipReader copy(MappedFile::open(out + "/iter_0000000/" + f));
      QCOMPARE(copy.entries().size(), in.entries().size());
      int differ = 0;
      for (size_t i = 0; i < in.entries().size(); ++i) {
        QCOMPARE(copy.entries()[i].name, in.entries()[i].name);
        const auto a = in.data(in.entries()[i]);
        const auto b = copy.data(copy.entries()[i]);
        if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) {
          ++differ;
          QVERIFY2(in.entries()[i].name.find("/data/") != std::string::npos, in.entries()[i].name.c_str());
        }
      }
      QCOMPARE(differ, records);
    }
    const auto report = diagnose_json(out, 0);
    QVERIFY(report["verdict"].toObject()["clean"].toBool());
    QVERIFY(problem_codes(report).empty());

    auto refreshed = e;
    refreshed.save_dir = out;
    const auto truth = megatron_truth(refreshed, dir, {"--step"});
    QCOMPARE(truth["mains_equal_weights"].toArray().size(), mains);
    QVERIFY(truth["mains_differ"].toArray().isEmpty());
    QVERIFY(truth["step_ok"].toBool());
  }

  // What the views show (through the registry, as the session opens a source): the diagnosis is diagnose's
  // (same codes and verdict).
  void viewsGetTheDiagnosis() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_megatron_legacy_tp2_stale");
    const auto source = sources::find_source(e.save_dir);
    QCOMPARE(std::string(source->name()), std::string("megatron-legacy"));
    const auto d = source->diagnosis(e.save_dir);
    QVERIFY(d.has_value());
    QCOMPARE(d->findings.size(), size_t{1});
    QCOMPARE(d->findings[0].code, std::string("fp32-master-mismatch"));
    QVERIFY(!d->clean);
    const auto report = diagnose_json(e.save_dir, 1);
    QCOMPARE(QString::fromStdString(d->verdict), report["verdict"].toObject()["text"].toString());
  }

  // The views' layout map (#28): the model's global tensors (tensor-parallel pieces side by side, pipeline
  // stages' layers under their global numbers) with each rank file's chunk box, and the fp32 mains and Adam
  // moments under megatron-core's torch_dist names, equal to what megatron-core declares of its own params
  // and optimizer and to torch's load of the rank files, byte range by byte range
  // (megatron_legacy_layout_check.py). What is not placed keeps its rank's key: only torch Adam's "step"
  // here. main's map held every tensor under its rank's key alone (no global key: all missing).
  void storageMapPlacesTheGlobalTensors_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<int>("keys");
    QTest::addColumn<int>("files");
    // 29 params, each with its main, exp_avg and exp_avg_sq
    QTest::newRow("tp1") << QString("v019_megatron_legacy_tp1") << 116 << 1;
    QTest::newRow("tp2") << QString("v019_megatron_legacy_tp2") << 116 << 2;
    QTest::newRow("pp2") << QString("v019_megatron_legacy_pp2") << 116 << 2;
    QTest::newRow("distopt_dp2") << QString("v019_megatron_legacy_distopt_dp2") << 116 << 2;
  }
  void storageMapPlacesTheGlobalTensors() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, entry);
    QFETCH(int, keys);
    QFETCH(int, files);
    const auto e = realds::checkpoint(entry.toStdString());
    const auto map = sources::find_source(e.save_dir)->storage_map(e.save_dir);
    QVERIFY(map.has_value());
    QCOMPARE(map->format, std::string("megatron-legacy"));
    QCOMPARE(map->files.size(), static_cast<size_t>(files));
    test::TempDir dir;
    const auto spec = dir.file("map.json");
    {
      std::ofstream f(spec);
      f << QJsonDocument(map_json(*map)).toJson().toStdString();
    }
    std::vector<std::string> args{test::source_dir() + "/tests/realds/megatron_legacy_layout_check.py",
                                  "--ckpt",
                                  e.save_dir,
                                  "--tp",
                                  std::to_string(e.tp),
                                  "--pp",
                                  std::to_string(e.pp),
                                  "--map",
                                  spec,
                                  "--json",
                                  dir.file("layout.json")};
    if (e.spec["optimizer"].toString() == "distributed")
      args.insert(args.end(), {"--optimizer", "distributed"});
    const auto check = realds::launch_with_megatron_core(args, e.world, kMcore, dir.file("logs"));
    QVERIFY2(check.exit_code == 0, realds::describe(check).c_str());
    const auto j = realds::parse(test::read_text(dir.file("layout.json")));
    qInfo("layout judge: %d keys expected, %lld equal, %lld rank-own keys", j["expected"].toInt(),
          static_cast<long long>(j["equal"].toArray().size()),
          static_cast<long long>(j["own_rank"].toArray().size()));
    QCOMPARE(j["expected"].toInt(), keys);
    QCOMPARE(j["equal"].toArray().size(), keys);
    for (const auto& own : j["own_rank"].toArray())
      QVERIFY2(own.toString().endsWith(".step"), qPrintable(own.toString()));
  }

  // The layout judge can fail: tp2's map with one key's two tensor-rank boxes swapped is one key that
  // differs, and another chunk's byte range moved by one element is one range that does not hold its piece.
  void aWrongBoxIsNamedByTheLayoutJudge() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_megatron_legacy_tp2");
    auto map = *sources::find_source(e.save_dir)->storage_map(e.save_dir);
    const auto key = [&](const std::string& name) {
      return std::find_if(map.keys.begin(), map.keys.end(), [&](const auto& k) { return k.key == name; });
    };
    const auto qkv = key("decoder.layers.0.self_attention.linear_qkv.weight");
    const auto fc2 = key("decoder.layers.1.mlp.linear_fc2.weight");
    QVERIFY(qkv != map.keys.end() && fc2 != map.keys.end());
    QCOMPARE(qkv->chunks.size(), size_t{2});
    std::swap(qkv->chunks[0].offsets, qkv->chunks[1].offsets);
    fc2->chunks[1].offset += 2;
    test::TempDir dir;
    const auto spec = dir.file("map.json");
    test::write_text(spec, QJsonDocument(map_json(map)).toJson().toStdString());
    const auto check = realds::launch_with_megatron_core(
        {test::source_dir() + "/tests/realds/megatron_legacy_layout_check.py", "--ckpt", e.save_dir, "--tp",
         "2", "--map", spec, "--json", dir.file("layout.json")},
        2, kMcore, dir.file("logs"));
    QVERIFY(check.exit_code != 0);
    const auto j = realds::parse(test::read_text(dir.file("layout.json")));
    QCOMPARE(j["differ"].toArray(), QJsonArray{"decoder.layers.0.self_attention.linear_qkv.weight"});
    // the swapped boxes put each file's bytes where the other rank's piece belongs
    QCOMPARE(j["bytes_differ"].toArray(),
             (QJsonArray{"decoder.layers.0.self_attention.linear_qkv.weight in mp_rank_01/model_optim_rng.pt",
                         "decoder.layers.0.self_attention.linear_qkv.weight in mp_rank_00/model_optim_rng.pt",
                         "decoder.layers.1.mlp.linear_fc2.weight in mp_rank_01/model_optim_rng.pt"}));
    QCOMPARE(j["equal"].toArray().size(), 115);
  }

  // inspect lists every rank file with its keys, the args read as data, the model's tensors and the
  // optimizer's groups and mains, from the saved args' parallel sizes.
  void inspectListsTheRankFiles() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_megatron_legacy_tp2");
    const auto r = test::run_cli({"inspect", e.save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto j = realds::parse(r.out);
    QCOMPARE(j["format"].toString(), QString("megatron-legacy"));
    QCOMPARE(j["iteration"].toInt(), 2);
    QCOMPARE(j["parallel"].toObject()["tp"].toInt(), 2);
    const auto ranks = j["ranks"].toArray();
    QCOMPARE(ranks.size(), 2);
    for (int i = 0; i < 2; ++i) {
      const auto rank = ranks[i].toObject();
      QCOMPARE(rank["file"].toString(), QString("mp_rank_0%1/model_optim_rng.pt").arg(i));
      QCOMPARE(rank["tp"].toInt(), i);
      QCOMPARE(rank["model"].toArray().size(), 29);
      QCOMPARE(rank["args"].toObject()["type"].toString(), QString("argparse.Namespace"));
      const auto groups = rank["optimizer"].toObject()["param_groups"].toArray();
      QCOMPARE(groups.size(), 2);
      QCOMPARE(groups[0].toObject()["fp32_mains"].toInt() + groups[1].toObject()["fp32_mains"].toInt(), 29);
    }
    // with the distributed optimizer, each rank folder's distrib_optim.pt: its coalesced state and the mains
    // placed
    const auto d =
        test::run_cli({"inspect", realds::checkpoint("v019_megatron_legacy_distopt_dp2").save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(d, 0);
    const auto dopt = realds::parse(d.out)["ranks"].toArray()[0].toObject()["distrib_optim_pt"].toObject();
    QCOMPARE(dopt["file"].toString(), QString("mp_rank_00/distrib_optim.pt"));
    QCOMPARE(dopt["tensors"].toArray().size(), 3);
    QCOMPARE(dopt["mains_placed"].toInt(), 29);
  }
};

QTEST_GUILESS_MAIN(TestRealdsMegatronLegacy)
#include "test_realds_megatron_legacy.moc"
