// Tensor-, pipeline- and expert-parallel checkpoints real DeepSpeed wrote (par_models.py: pp 2 x tp 2 x dp 2
// bf16 with BF16_Optimizer and DeepSpeed's PipelineModule; tp 2 x dp 2 ZeRO-2 fp16 with Megatron-style
// layers; an MoE model with 4 experts over ep 2, ZeRO-2 fp16; tp 2 x dp 2 under ZeRO-3), run through ckptdoc
// as a user would: inspect shows every coordinate and every param of every stage, diagnose is clean on each
// and names a removed tensor-rank, layer or expert file and a perturbed replicated param, and the merged
// export equals the model DeepSpeed's engine held.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

QJsonObject cli_json(const std::vector<std::string>& args, int want_exit) {
  const auto r = test::run_cli(args);
  if (r.exit_code != want_exit)
    throw std::runtime_error(args[0] + " exited " + std::to_string(r.exit_code) + " (wanted " +
                             std::to_string(want_exit) + ")\n" + r.out.substr(0, 6000) + r.err);
  return realds::parse(r.out);
}

// par_edit.py through `realds.py py` (DeepSpeed importable: its files pickle DeepSpeed objects).
test::RunResult edit(const std::vector<std::string>& args, const std::string& ds = "0.12.6") {
  std::vector<std::string> all{test::source_dir() + "/tests/realds/par_edit.py"};
  all.insert(all.end(), args.begin(), args.end());
  return realds::python_with_deepspeed(all, ds);
}

std::string tag_file(const std::string& save_dir, const realds::Entry& e, const std::string& name) {
  return save_dir + "/" + e.tag + "/" + name;
}

const QJsonObject* finding(const QJsonObject& report, const std::string& code, QJsonObject& out) {
  for (const auto& f : report["findings"].toArray())
    if (f.toObject()["code"].toString().toStdString() == code) {
      out = f.toObject();
      return &out;
    }
  return nullptr;
}

std::string all_findings(const QJsonObject& report) {
  return QJsonDocument(report["findings"].toArray()).toJson(QJsonDocument::Compact).left(4000).toStdString();
}

// The names of the model DeepSpeed's engine assembled in the training run (par_train.py's reference).
std::set<std::string> reference_names(const std::string& name) {
  const auto r =
      realds::python_with_deepspeed({"-c", "import sys, torch\nfor k in torch.load(sys.argv[1]): print(k)\n",
                                     realds::reference(name, "fp32")});
  if (r.exit_code != 0) throw std::runtime_error("reading the reference failed: " + r.err);
  std::set<std::string> out;
  size_t at = 0;
  while (at < r.out.size()) {
    const size_t nl = r.out.find('\n', at);
    const std::string line = r.out.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    if (!line.empty()) out.insert(line);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return out;
}

// inspect --json: the job's sizes, every file's coordinates, one catalog per model-parallel rank whose params
// together are exactly the engine's model (each with the file its 16-bit weight is read from).
void inspect_job(const std::string& name) {
  REALDS_REQUIRE_DS(realds::version_of(name));
  const auto e = realds::checkpoint(name);
  const auto j = cli_json({"inspect", e.save_dir, "--json"}, 0);
  const auto par = j["parallel"].toObject();
  QCOMPARE(par["pp"].toInt(), e.pp);
  QCOMPARE(par["tp"].toInt(), e.tp);
  QCOMPARE(par["ep"].toInt(), e.ep);
  QCOMPARE(par["mp_world_size"].toInt(), e.pp * e.tp);
  QCOMPARE(j["dp_world_size"].toInt(), e.dp);
  QCOMPARE(par["pipeline"].toBool(), e.pp > 1);
  std::set<std::string> files;
  for (const auto& fv : j["files"].toArray()) {
    const auto f = fv.toObject();
    const std::string role = f["role"].toString().toStdString(), path = f["path"].toString().toStdString();
    files.insert(path);
    if (role == "model" || role == "optim" || role == "layer" || role == "expert") {
      QVERIFY2(f["pp"].isDouble() && f["tp"].isDouble(), path.c_str());
      QVERIFY2(f["pp"].toInt() < e.pp && f["tp"].toInt() < e.tp, path.c_str());
      QVERIFY2(f["mp_rank"].toInt() == f["pp"].toInt() * e.tp + f["tp"].toInt(), path.c_str());
    }
    if (role == "optim") QVERIFY2(f["dp_rank"].toInt() >= 0 && f["dp_rank"].toInt() < e.dp, path.c_str());
    if (role == "layer") QVERIFY2(f["layer"].isDouble(), path.c_str());
    if (role == "expert") {
      QVERIFY2(f["expert"].isDouble() && f["ep"].isDouble(), path.c_str());
      QCOMPARE(f["ep"].toInt(), f["expert"].toInt() / (4 / e.ep));  // 4 experts over ep ranks
    }
    if (role == "expert_optim") QVERIFY2(f["ep"].isDouble(), path.c_str());
  }
  const auto slices = j["slices"].toArray();
  QCOMPARE(slices.size(), qsizetype(e.pp * e.tp));
  std::map<int, std::set<std::string>> by_tp;  // tensor rank -> params of every stage
  std::set<int> eps;
  for (const auto& sv : slices) {
    const auto s = sv.toObject();
    QCOMPARE(s["mp_rank"].toInt(), s["pp"].toInt() * e.tp + s["tp"].toInt());
    for (const auto& gv : s["groups"].toArray()) {
      const auto g = gv.toObject();
      QCOMPARE(g["pp"].toInt(), s["pp"].toInt());
      QCOMPARE(g["tp"].toInt(), s["tp"].toInt());
      if (g["expert"].toBool()) eps.insert(g["ep"].toInt());
      for (const auto& pv : g["params"].toArray()) {
        const auto p = pv.toObject();
        const std::string pname = p["name"].toString().toStdString();
        QVERIFY2(by_tp[s["tp"].toInt()].insert(pname).second, ("listed twice: " + pname).c_str());
        if (e.stage < 3)
          QVERIFY2(files.count(p["lp_file"].toString().toStdString()), ("no lp file for " + pname).c_str());
        else  // ZeRO-3 model files hold placeholders: no 16-bit weight is saved
          QVERIFY2(p["lp_file"].isNull(), pname.c_str());
      }
      for (const auto& rv : g["partitions"].toArray())
        QVERIFY(rv.toObject()["rank"].toInt() >= 0 && rv.toObject()["rank"].toInt() < e.dp);
    }
  }
  const auto want = reference_names(e.name);
  for (const auto& [tp, names] : by_tp)
    QVERIFY2(names == want,
             ("tensor rank " + std::to_string(tp) + " does not list the engine's params").c_str());
  QCOMPARE(static_cast<int>(eps.size()), e.ep > 1 ? e.ep : 0);
  // The text view says the same.
  const auto text = test::run_cli({"inspect", e.save_dir});
  CKPTDOC_EXPECT_EXIT(text, 0);
  if (e.pp * e.tp > 1)
    QVERIFY2(text.out.find("pipeline " + std::to_string(e.pp) + " x tensor " + std::to_string(e.tp) +
                           " x data " + std::to_string(e.dp)) != std::string::npos,
             text.out.c_str());
  if (e.ep > 1) QVERIFY2(text.out.find("over expert-parallel 2") != std::string::npos, text.out.c_str());
}

// Healthy: exit 0, no error or warning; every param of every model-parallel rank compared lp with fp32 (the
// pipeline's weights come from its layer files, the experts' from the expert files).
void diagnose_clean(const std::string& name) {
  REALDS_REQUIRE_DS(realds::version_of(name));
  const auto e = realds::checkpoint(name);
  const auto report = cli_json({"diagnose", e.save_dir, "--json", "--device", "cpu"}, 0);
  QVERIFY2(realds::codes(report, "error").empty() && realds::codes(report, "warning").empty(),
           all_findings(report).c_str());
  const auto params = report["params"].toArray();
  const size_t per_rank = reference_names(e.name).size();
  std::set<std::string> seen;
  for (const auto& pv : params) {
    const auto p = pv.toObject();
    if (e.stage < 3) {  // ZeRO-3 saves no 16-bit weights to compare with
      QVERIFY2(p["lp_vs_fp32"].isObject(), p["name"].toString().toUtf8().constData());
      QVERIFY(p["lp_vs_fp32"].toObject()["exact_fraction"].toDouble() > 0.999);
    }
    QVERIFY2(p["fp32"].isObject(), p["name"].toString().toUtf8().constData());
    seen.insert(std::to_string(p["tp"].toInt(-1)) + "/" + p["name"].toString().toStdString());
  }
  QCOMPARE(seen.size(), per_rank * static_cast<size_t>(e.tp));
  // MoE: DeepSpeed before 0.14.5 records the expert groups' param_slice_mappings with the whole dp size
  // (info).
  if (e.ep > 1) {
    const auto info = realds::codes(report, "info");
    const bool said = std::find(info.begin(), info.end(), "expert-slice-mappings") != info.end();
    QCOMPARE(said, e.ds == "0.12.6");
  }
}

// The merged export equals the model DeepSpeed's engine assembled in the training run, bit for bit (fp32
// masters and 16-bit weights): every stage, tensor ranks merged by universal_checkpoint_info, every expert.
void merged_export(const std::string& name) {
  REALDS_REQUIRE_DS(realds::version_of(name));
  const auto e = realds::checkpoint(name);
  test::TempDir dir;
  for (const char* source : {"fp32", "lp"}) {
    if (e.stage == 3 && std::string(source) == "lp") continue;  // ZeRO-3 saves no 16-bit weights
    const auto out = dir.file(std::string(source) + ".pt");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", out, "--source", source, "--dtype",
                                       "float32", "--device", "cpu"}),
                        0);
    const auto r = edit({"equal", out, realds::reference(e.name, source)}, e.ds);
    QVERIFY2(r.exit_code == 0, (r.out + r.err).c_str());
  }
}

}  // namespace

class TestRealdsParallel : public QObject {
  Q_OBJECT

 private slots:
  // One function per job: each may have to write its fixture first (up to 8 DeepSpeed ranks).
  void inspectPipe3d() { inspect_job("par_pipe3d"); }
  void inspectTensorParallel() { inspect_job("par_tp"); }
  void inspectMoe() { inspect_job("par_moe"); }
  // DeepSpeed 0.19: no expp_rank optimizer files with ZeRO; expert groups' mappings use the expert dp size.
  void inspectMoe019() { inspect_job("v019_par_moe"); }
  void inspectTensorParallel019() { inspect_job("v019_par_tp"); }
  void diagnoseCleanTensorParallel019() { diagnose_clean("v019_par_tp"); }
  void mergedExportTensorParallel019() { merged_export("v019_par_tp"); }
  void diagnoseCleanMoe019() { diagnose_clean("v019_par_moe"); }
  void mergedExportMoe019() { merged_export("v019_par_moe"); }
  // DeepSpeed 0.19's pipeline (pp 2 x tp 2 x dp 2, BF16_Optimizer, layer files),
  // checkpoint_parallel_dimensions in every model file.
  void inspectPipe3d019() { inspect_job("v019_par_pipe3d"); }
  void diagnoseCleanPipe3d019() { diagnose_clean("v019_par_pipe3d"); }
  void mergedExportPipe3d019() { merged_export("v019_par_pipe3d"); }
  // AutoTP (tp 2 x dp 2, ZeRO-1 bf16): DeepSpeed shards a HuggingFace Llama itself and writes the merge rules
  // (anchored patterns, a vocabulary-parallel lm_head); the export equals the engine's consolidated 16-bit
  // weights and ds_to_universal.py's fp32 masters.
  void inspectAutoTp019() { inspect_job("v019_autotp_z1"); }
  void diagnoseCleanAutoTp019() { diagnose_clean("v019_autotp_z1"); }
  void mergedExportAutoTp019() { merged_export("v019_autotp_z1"); }
  // The text table keeps each row's slice label whole (HF names are long and AutoTP rows differ only in it)
  // and its columns in line: every row is as wide as the header, in characters, ellipsis or not.
  void diagnoseTableKeepsSliceLabels019() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_autotp_z1");
    const auto r = test::run_cli({"diagnose", e.save_dir, "--device", "cpu", "--max-params", "1000"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const QStringList lines = QString::fromStdString(r.out).split('\n');
    const auto header = std::find_if(lines.begin(), lines.end(),
                                     [](const QString& l) { return l.startsWith("param (worst"); });
    QVERIFY2(header != lines.end(), r.out.c_str());
    int rows = 0, shortened = 0;
    for (auto it = header + 1; it != lines.end() && !it->isEmpty(); ++it, ++rows) {
      QVERIFY2(it->startsWith("[tp 0] ") || it->startsWith("[tp 1] "), qPrintable(*it));
      QCOMPARE(it->size(), header->size());
      shortened += it->contains(QString::fromUtf8("…")) ? 1 : 0;
    }
    QVERIFY(rows > 0 && shortened > 0);  // else this shows nothing
  }

  // One rank's fp32 masters replaced by noise (damage.py stale-fp32: the first optimizer file of dp rank 0,
  // i.e. stage 0 / tensor rank 0): named as fp32-master-mismatch of that rank and slice, with the replicated
  // params' masters now differing between the tensor ranks (their 16-bit weights still equal), and nothing
  // else.
  void diagnoseNamesStaleMasters019_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("pipeline") << "v019_par_pipe3d";
    QTest::newRow("autotp") << "v019_autotp_z1";
  }
  void diagnoseNamesStaleMasters019() {
    QFETCH(QString, name);
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    const auto d = realds::python_with_deepspeed(
        {test::source_dir() + "/tests/realds/damage.py", in, "stale-fp32", "0"}, e.ds);
    QVERIFY2(d.exit_code == 0, (d.out + d.err).c_str());
    const auto report = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 1);
    auto errors = realds::codes(report, "error");
    std::sort(errors.begin(), errors.end());
    QCOMPARE(errors, (std::vector<std::string>{"fp32-master-mismatch", "tp-replicated-mismatch"}));
    QVERIFY2(realds::codes(report, "warning").empty(), all_findings(report).c_str());
    QJsonObject f;
    QVERIFY(finding(report, "fp32-master-mismatch", f));
    QCOMPARE(f["ranks"].toArray(), QJsonArray{0});
    QCOMPARE(f["repair"].toString(), QString("refresh-fp32"));
    const std::string where = e.pp > 1 ? "pp 0, tp 0: " : "tp 0: ";
    QVERIFY2(f["message"].toString().toStdString().rfind(where, 0) == 0, all_findings(report).c_str());
    QVERIFY(finding(report, "tp-replicated-mismatch", f));
    QVERIFY2(f["message"].toString().contains("16-bit weights equal"), all_findings(report).c_str());
  }
  // 0.19.5+ records {pp_degree, tp_degree} in every model file: a record that disagrees with the layout the
  // files form (here: pipeline 1 x tensor 4 claimed for the 2 x 2 job) is named.
  void diagnoseNamesParallelDimensionsMismatch019() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_par_pipe3d");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    for (int m = 0; m < e.pp * e.tp; ++m) {
      const auto r = edit({"set", tag_file(in, e, "mp_rank_0" + std::to_string(m) + "_model_states.pt"),
                           "checkpoint_parallel_dimensions", R"({"pp_degree": 1, "tp_degree": 4})"},
                          e.ds);
      QVERIFY2(r.exit_code == 0, (r.out + r.err).c_str());
    }
    const auto report = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 1);
    QJsonObject f;
    QVERIFY2(finding(report, "topology-mismatch", f), all_findings(report).c_str());
    const std::string msg = f["message"].toString().toStdString();
    QVERIFY2(msg.find("pipeline 1 x tensor 4") != std::string::npos &&
                 msg.find("files form pipeline 2 x tensor 2") != std::string::npos,
             msg.c_str());
  }

  // AutoTP records fused params (q, k and v in one Linear) in parameter_with_sub_params: DeepSpeed's
  // converter regroups their slices per sub-param, a plain concatenation would interleave them. ckptdoc does
  // not regroup: with one such entry in the real checkpoint's info, the merged export is refused, naming the
  // param and why, and one tensor rank's slices still export.
  void exportRefusesAutoTpSubParams019() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_autotp_z1");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    const std::string fused = "model.layers.0.mlp.gate_proj.weight";
    const auto ed = edit({"set-uci", tag_file(in, e, "mp_rank_00_model_states.pt"),
                          tag_file(in, e, "mp_rank_01_model_states.pt"), "--key", "parameter_with_sub_params",
                          R"([{"patterns": ["^model[.]layers[.]0[.]mlp[.]gate_proj[.]weight$"],
                              "shape": [[16, 16], -1], "partition_dim": 0}])"},
                         e.ds);
    QVERIFY2(ed.exit_code == 0, (ed.out + ed.err).c_str());
    const auto r = test::run_cli({"export", in, "-o", dir.file("x.pt"), "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find(fused + " (fused sub-params") != std::string::npos, r.err.c_str());
    QVERIFY(!fs::exists(dir.file("x.pt")));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", in, "-o", dir.file("tp1.pt"), "--tp-rank", "1"}), 0);
    // diagnose is still clean: the replicated params are compared, the fused one is not a replicated one
    const auto report = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 0);
    QVERIFY2(realds::codes(report, "error").empty(), all_findings(report).c_str());
  }
  void inspectTensorParallelZero3() { inspect_job("par_tp_z3"); }
  void diagnoseCleanPipe3d() { diagnose_clean("par_pipe3d"); }
  void diagnoseCleanTensorParallel() { diagnose_clean("par_tp"); }
  void diagnoseCleanMoe() { diagnose_clean("par_moe"); }
  void diagnoseCleanTensorParallelZero3() { diagnose_clean("par_tp_z3"); }
  void mergedExportPipe3d() { merged_export("par_pipe3d"); }
  void mergedExportTensorParallel() { merged_export("par_tp"); }
  void mergedExportMoe() { merged_export("par_moe"); }
  void mergedExportTensorParallelZero3() { merged_export("par_tp_z3"); }
  // DeepSpeed v0.14.5: the expert groups' param_slice_mappings are right, and read as they are.
  void diagnoseCleanMoeV145() { diagnose_clean("par_moe_v145"); }
  void mergedExportMoeV145() { merged_export("par_moe_v145"); }

  // A file of one tensor rank, pipeline layer or expert removed: named, as an error.
  void diagnoseNamesMissingFiles_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("code");
    QTest::newRow("tp model file") << "par_tp"
                                   << "mp_rank_01_model_states.pt"
                                   << "rank-file-missing";
    QTest::newRow("tp optim file") << "par_tp"
                                   << "zero_pp_rank_1_mp_rank_01_optim_states.pt"
                                   << "rank-file-missing";
    QTest::newRow("pipeline layer") << "par_pipe3d"
                                    << "layer_03-model_01-model_states.pt"
                                    << "layer-file-missing";
    QTest::newRow("pipeline stage") << "par_pipe3d"
                                    << "mp_rank_02_model_states.pt"
                                    << "rank-file-missing";
    QTest::newRow("expert") << "par_moe"
                            << "layer_0_expert_2_mp_rank_00_model_states.pt"
                            << "expert-file-missing";
  }
  void diagnoseNamesMissingFiles() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    QFETCH(QString, file);
    QFETCH(QString, code);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    fs::remove(tag_file(in, e, file.toStdString()));
    const auto report = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 1);
    QJsonObject f;
    QVERIFY2(finding(report, code.toStdString(), f), all_findings(report).c_str());
    QCOMPARE(f["severity"].toString(), QString("error"));
    // The message names the file (an optimizer file: its dp rank, with the tensor rank as the finding's
    // label).
    const std::string msg = f["message"].toString().toStdString();
    if (file.startsWith("zero_pp_rank_"))
      QVERIFY2(msg.find("tp 1: optimizer-states file(s) of dp rank(s) 1 missing") != std::string::npos,
               msg.c_str());
    else
      QVERIFY2(msg.find(file.toStdString()) != std::string::npos, msg.c_str());
  }

  // A replicated param (row-parallel bias, layer norm) changed on one tensor rank: tp-replicated-mismatch
  // names it, by the checkpoint's universal_checkpoint_info, or without it by a user's rule file (no rules:
  // info only).
  void diagnoseNamesPerturbedReplicatedParam() {
    REALDS_REQUIRE();
    for (const char* nm : {"par_tp", "par_pipe3d"}) {
      const auto e = realds::checkpoint(nm);
      test::TempDir dir;
      const auto in = realds::copy_of(e, dir);
      const bool pipe = e.pp > 1;
      const std::string param = pipe ? "3.fc2.bias" : "fc2.bias";
      const auto r =
          pipe ? edit({"perturb", tag_file(in, e, "layer_03-model_01-model_states.pt"), "fc2.bias", "0.0625"})
               : edit({"perturb", tag_file(in, e, "mp_rank_01_model_states.pt"), "fc2.bias", "0.0625",
                       "--module"});
      QVERIFY2(r.exit_code == 0, r.err.c_str());
      const auto report = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 1);
      QJsonObject f;
      QVERIFY2(finding(report, "tp-replicated-mismatch", f), all_findings(report).c_str());
      QCOMPARE(f["params"].toArray().size(), qsizetype(1));
      QCOMPARE(f["params"].toArray()[0].toString().toStdString(), param);
      // Two copies: which one drifted cannot be told, so both tensor ranks are named.
      QCOMPARE(f["ranks"].toArray(), (QJsonArray{0, 1}));
      QVERIFY2(f["message"].toString().contains("cannot be told"), all_findings(report).c_str());
      QCOMPARE(f["evidence"].toObject()["params_without_majority"].toDouble(), 1.0);
      QVERIFY(f["evidence"].toObject()["max_abs_diff_lp"].toDouble() > 0.05);
      if (pipe) continue;
      // Without universal_checkpoint_info the replicated params are unknown (info), a rule file names them.
      const auto s =
          edit({"drop-key", tag_file(in, e, "mp_rank_00_model_states.pt"),
                tag_file(in, e, "mp_rank_01_model_states.pt"), "--key", "universal_checkpoint_info"});
      QVERIFY2(s.exit_code == 0, s.err.c_str());
      const auto bare = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 1);
      QVERIFY2(finding(bare, "tp-rules-unknown", f), all_findings(bare).c_str());
      QVERIFY(!finding(bare, "tp-replicated-mismatch", f));
      const std::string rules = dir.file("rules.json");
      test::write_text(
          rules, R"({"tp_replicated_parameter_patterns": ["ln\\d\\.weight", "ln\\d\\.bias", "fc2\\.bias"]})");
      const auto ruled = cli_json({"diagnose", in, "--json", "--device", "cpu", "--tp-rules", rules}, 1);
      QVERIFY2(finding(ruled, "tp-replicated-mismatch", f), all_findings(ruled).c_str());
      QCOMPARE(f["params"].toArray()[0].toString().toStdString(), param);
    }
  }

  // Four tensor ranks (0.19): the three that agree outvote the one whose replicated bias was changed,
  // whichever it is, tensor rank 0 included.
  void diagnoseNamesTheOutvotedTensorRank019_data() {
    QTest::addColumn<int>("rank");
    QTest::newRow("tp rank 2") << 2;
    QTest::newRow("tp rank 0") << 0;
  }
  void diagnoseNamesTheOutvotedTensorRank019() {
    QFETCH(int, rank);
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_par_tp4");
    QCOMPARE(e.tp, 4);
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    const auto clean = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 0);
    QVERIFY2(realds::codes(clean, "error").empty(), all_findings(clean).c_str());
    const auto r = edit({"perturb", tag_file(in, e, "mp_rank_0" + std::to_string(rank) + "_model_states.pt"),
                         "fc2.bias", "0.0625", "--module"},
                        e.ds);
    QVERIFY2(r.exit_code == 0, r.err.c_str());
    const auto report = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 1);
    QJsonObject f;
    QVERIFY2(finding(report, "tp-replicated-mismatch", f), all_findings(report).c_str());
    QCOMPARE(f["params"].toArray(), (QJsonArray{"fc2.bias"}));
    QCOMPARE(f["ranks"].toArray(), (QJsonArray{rank}));
    QCOMPARE(f["evidence"].toObject()["params_without_majority"].toDouble(), 0.0);
    const QString msg = f["message"].toString();
    QVERIFY2(msg.contains(QString("Tensor rank(s) %1 disagree").arg(rank)), qPrintable(msg));
  }

  void diagnoseCleanTp4019() { diagnose_clean("v019_par_tp4"); }
  void mergedExportTp4019() { merged_export("v019_par_tp4"); }
  // A replicated param whose tensor ranks differ: the merged export refuses it by name and writes nothing (as
  // ds_to_universal.py refuses it); with --force it writes the copy the other three tensor ranks agree on,
  // says so, and the file equals the model the DeepSpeed engine assembled before the damage.
  void mergedExportOfDifferingReplicatedParam019() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("v019_par_tp4");
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir);
    const auto r = edit(
        {"perturb", tag_file(in, e, "mp_rank_00_model_states.pt"), "fc2.bias", "0.0625", "--module"}, e.ds);
    QVERIFY2(r.exit_code == 0, r.err.c_str());
    const auto out = dir.file("lp.pt");
    const std::vector<std::string> args{"export", in,        "-o",      out,        "--source",
                                        "lp",     "--dtype", "float32", "--device", "cpu"};
    const auto refused = test::run_cli(args);
    CKPTDOC_EXPECT_EXIT(refused, 2);
    QVERIFY2(refused.err.find("fc2.bias") != std::string::npos &&
                 refused.err.find("tensor rank(s) 0 differ from the others") != std::string::npos,
             refused.err.c_str());
    QVERIFY(!std::filesystem::exists(out));
    auto forced_args = args;
    forced_args.insert(forced_args.end(), {"--force", "--json"});
    const auto forced = test::run_cli(forced_args);
    CKPTDOC_EXPECT_EXIT(forced, 0);
    const auto notes = realds::parse(forced.out)["notes"].toArray();
    QCOMPARE(notes.size(), qsizetype(1));
    QVERIFY2(notes[0].toString().startsWith("fc2.bias:"), qPrintable(notes[0].toString()));
    QVERIFY2(forced.err.find("warning: fc2.bias") != std::string::npos, forced.err.c_str());
    const auto same = edit({"equal", out, realds::reference(e.name, "lp")}, e.ds);
    QVERIFY2(same.exit_code == 0, (same.out + same.err).c_str());
  }

  // Expert files that disagree with each other or with num_experts.
  void diagnoseNamesExpertCountsAndDuplicates() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("par_moe");
    {
      test::TempDir dir;
      const auto in = realds::copy_of(e, dir);
      fs::copy_file(tag_file(in, e, "layer_0_expert_1_mp_rank_00_model_states.pt"),
                    tag_file(in, e, "layer_0_expert_3_mp_rank_00_model_states.pt"),
                    fs::copy_options::overwrite_existing);
      const auto report = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 1);
      QJsonObject f;
      QVERIFY2(finding(report, "expert-file-duplicated", f), all_findings(report).c_str());
    }
    {
      test::TempDir dir;
      const auto in = realds::copy_of(e, dir);
      const auto r = edit({"set", tag_file(in, e, "mp_rank_00_model_states.pt"), "num_experts", "[6]"});
      QVERIFY2(r.exit_code == 0, r.err.c_str());
      const auto report = cli_json({"diagnose", in, "--json", "--device", "cpu"}, 1);
      QJsonObject f;
      QVERIFY2(finding(report, "expert-count-mismatch", f), all_findings(report).c_str());
    }
  }

  // One tensor rank's slices, unmerged; no rules: a refusal naming the params; a rule file merges (and
  // averages).
  void exportPerTensorRankAndByRuleFile() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("par_tp");
    test::TempDir dir;
    const auto ref = realds::reference(e.name, "fp32");
    for (int rank : {0, 1}) {
      const auto out = dir.file("tp" + std::to_string(rank) + ".pt");
      CKPTDOC_EXPECT_EXIT(test::run_cli({"export", e.save_dir, "-o", out, "--tp-rank", std::to_string(rank)}),
                          0);
      const auto r = edit({"slice-of", out, ref, "2", std::to_string(rank)});
      QVERIFY2(r.exit_code == 0, (r.out + r.err).c_str());
    }
    const auto in = realds::copy_of(e, dir);
    const auto s =
        edit({"drop-key", tag_file(in, e, "mp_rank_00_model_states.pt"),
              tag_file(in, e, "mp_rank_01_model_states.pt"), "--key", "universal_checkpoint_info"});
    QVERIFY2(s.exit_code == 0, s.err.c_str());
    const auto refused = test::run_cli({"export", in, "-o", dir.file("x.pt")});
    CKPTDOC_EXPECT_EXIT(refused, 2);
    QVERIFY2(refused.err.find("--tp-rules") != std::string::npos, refused.err.c_str());
    // A partial rule file: the params it leaves out are named.
    const std::string partial = dir.file("partial.json");
    test::write_text(partial, R"({"tp_replicated_parameter_patterns": ["ln\\d\\.", "fc2\\.bias"]})");
    const auto named = test::run_cli({"export", in, "-o", dir.file("y.pt"), "--tp-rules", partial});
    CKPTDOC_EXPECT_EXIT(named, 2);
    for (const char* p : {"embed.weight", "fc1.weight", "fc1.bias", "fc2.weight", "head.weight"})
      QVERIFY2(named.err.find(p) != std::string::npos, named.err.c_str());
    QVERIFY2(named.err.find("ln1.weight") == std::string::npos, named.err.c_str());
    // The full rules as a file (Megatron's keys; fc1.bias averaged instead of concatenated).
    const std::string full = dir.file("full.json");
    test::write_text(full, R"({"original_vocab_size": 50,
      "vocabulary_parameter_patterns": ["embed\\.weight", "head\\.weight"],
      "tp_replicated_parameter_patterns": ["ln\\d\\.", "fc2\\.bias"],
      "parameter_with_row_parallelism_patterns": ["fc2\\.weight"],
      "parameter_to_average_patterns": ["fc1\\.bias"], "default_cat_dim": 0})");
    const auto out = dir.file("merged.pt");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", in, "-o", out, "--tp-rules", full}), 0);
    const auto avg = edit({"mean-of", out, ref, "fc1.bias", "2"});
    QVERIFY2(avg.exit_code == 0, (avg.out + avg.err).c_str());
  }
};

CKPTDOC_TEST_MAIN(TestRealdsParallel)
#include "test_realds_parallel.moc"
