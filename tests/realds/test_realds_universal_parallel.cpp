// Universal checkpoints of tensor- and pipeline-parallel jobs, judged by real DeepSpeed v0.12.6: `ckptdoc
// convert
// --to universal` merges the tensor-parallel slices as ds_to_universal.py does (the same files, equal
// tensors, where that script runs), and DeepSpeed's universal loader loads the output at other data-parallel
// sizes with the fp32 masters, moments and Adam step DeepSpeed holds after loading the source. What cannot be
// converted is refused with a reason.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <set>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

using realds::describe;
using realds::parse;

std::string compact(const QJsonObject& o) {
  return QJsonDocument(o).toJson(QJsonDocument::Compact).left(4000).toStdString();
}

test::RunResult convert(const std::string& src, const std::string& out) {
  return test::run_cli({"convert", src, "-o", out, "--to", "universal", "--json", "--device", "cpu"});
}

// The Adam steps par_load_check reports after a load (one per flat group, every rank).
std::set<double> adam_steps(const realds::LoadCheck& c) {
  std::set<double> s;
  for (const auto& v : c.verdict()["adam_steps"].toArray()) s.insert(v.toDouble());
  return s;
}

// par_edit.py through `realds.py py` (DeepSpeed importable: its files pickle DeepSpeed objects).
test::RunResult edit(const std::vector<std::string>& args) {
  std::vector<std::string> all{test::source_dir() + "/tests/realds/par_edit.py"};
  all.insert(all.end(), args.begin(), args.end());
  return realds::python_with_deepspeed(all);
}

}  // namespace

class TestRealdsUniversalParallel : public QObject {
  Q_OBJECT

  // Converts matrix entry `name`, then loads the output with load_universal at each world size (the job's own
  // tensor- and pipeline-parallel sizes, other data-parallel sizes): masters and moments equal to the
  // source's consolidated values, and the Adam step DeepSpeed resumes the source at.
  void loads_at(const std::string& name, const std::vector<int>& worlds) {
    const auto e = realds::checkpoint(name);
    test::TempDir dir;
    const auto r = convert(e.save_dir, dir.file("out"));
    QVERIFY2(r.exit_code == 0, describe(r).c_str());
    QVERIFY2(parse(r.out)["ok"].toBool(), r.out.substr(0, 4000).c_str());
    const auto source = realds::load(e.save_dir, name, {"--strict"});
    REALDS_EXPECT_STRICT(source);
    const auto step = adam_steps(source);
    QVERIFY(!step.empty());
    for (int world : worlds) {
      const auto c =
          realds::load(dir.file("out"), name,
                       {"--universal", "--strict", "--expect-fp32", realds::reference(name, "fp32"),
                        "--expect-moments", realds::reference(name, "moments")},
                       world);
      REALDS_EXPECT_STRICT(c);
      QVERIFY2(adam_steps(c) == step,
               ("world " + std::to_string(world) + ": not the source's Adam step\n" + c.describe()).c_str());
    }
  }

 private slots:
  // tp 2 x dp 2, ZeRO-2 fp16, with Megatron's universal_checkpoint_info (vocabulary-parallel embedding and
  // head, row-parallel fc2, replicated LayerNorms): the same files as ds_to_universal.py, equal tensors.
  void tensorParallelEqualsDsToUniversal() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("par_tp");
    test::TempDir dir;
    const std::string theirs = dir.file("theirs/" + e.tag + "_universal");
    fs::create_directories(fs::path(theirs).parent_path());
    const auto d = realds::python_with_deepspeed(
        {"-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", e.tag_dir(), "--output_folder",
         theirs, "--num_extract_workers", "1", "--num_merge_workers", "1"},
        e.ds);
    QVERIFY2(d.exit_code == 0, describe(d).c_str());
    const auto r = convert(e.save_dir, dir.file("ours"));
    QVERIFY2(r.exit_code == 0, describe(r).c_str());
    // The job saved no `iteration`: ckptdoc adds it to both tensor ranks' model files (0.12.6's loader needs
    // it).
    const std::string cmp = dir.file("compare.json");
    const auto c = realds::python_with_deepspeed(
        {test::source_dir() + "/tests/realds/compare_universal.py", theirs,
         dir.file("ours/" + e.tag + "_universal"), "--json", cmp, "--allowed-extra",
         "mp_rank_00_model_states.pt:iteration", "--allowed-extra", "mp_rank_01_model_states.pt:iteration"},
        e.ds);
    QVERIFY2(c.exit_code != 2, describe(c).c_str());
    const auto report = parse(test::read_text(cmp));
    QVERIFY2(report["ok"].toBool(), compact(report).c_str());
    // 10 params x 3 state files, optimizer_state.pt, two model files
    QCOMPARE(report["compared"].toInt(), 10 * 3 + 1 + 2);
  }

  // The same output loads at dp 1 and dp 3 (tp 2 kept).
  void tensorParallelLoadsAtDp1And3() {
    REALDS_REQUIRE();
    loads_at("par_tp", {2, 6});
  }

  // pp 2 x tp 2 x dp 2 BF16_Optimizer (DeepSpeed's PipelineModule): loads at dp 1. ds_to_universal.py of
  // v0.12.6 cannot convert this job at all: it wants a layer file for every layer, and the job's function
  // layer has none.
  void pipelineLoadsAtDp1() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("par_pipe3d");
    test::TempDir dir;
    const auto d = realds::python_with_deepspeed(
        {"-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", e.tag_dir(), "--output_folder",
         dir.file("theirs/x"), "--num_extract_workers", "1", "--num_merge_workers", "1"},
        e.ds);
    QVERIFY2(d.exit_code != 0 && (d.out + d.err).find("Cannot find layer_01") != std::string::npos,
             describe(d).c_str());
    loads_at("par_pipe3d", {4});
  }

  // What cannot be merged is refused, naming why, and nothing is written.
  void refusesWhatItCannotMerge() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("par_tp");
    test::TempDir dir;
    {  // no universal_checkpoint_info: how the slices merge is unknown
      const std::string in = realds::copy_of(e, dir, "plain");
      const std::vector<std::string> models{in + "/" + e.tag + "/mp_rank_00_model_states.pt",
                                            in + "/" + e.tag + "/mp_rank_01_model_states.pt"};
      std::vector<std::string> args{"drop-key"};
      args.insert(args.end(), models.begin(), models.end());
      args.insert(args.end(), {"--key", "universal_checkpoint_info"});
      const auto ed = edit(args);
      QVERIFY2(ed.exit_code == 0, describe(ed).c_str());
      const auto r = convert(in, dir.file("out_plain"));
      QCOMPARE(r.exit_code, 2);
      QVERIFY2((r.out + r.err).find("without universal_checkpoint_info") != std::string::npos,
               describe(r).c_str());
      QVERIFY(!fs::exists(dir.file("out_plain")));
    }
    {  // a replicated LayerNorm whose fp32 master differs between the tensor ranks (ds_to_universal.py
       // asserts)
      const std::string in = realds::copy_of(e, dir, "perturbed");
      const auto ed = edit({"perturb-master", in + "/" + e.tag + "/zero_pp_rank_0_mp_rank_01_optim_states.pt",
                            in + "/" + e.tag + "/zero_pp_rank_1_mp_rank_01_optim_states.pt", "--param",
                            "ln1.weight", "0.5"});
      QVERIFY2(ed.exit_code == 0, describe(ed).c_str());
      const auto r = convert(in, dir.file("out_perturbed"));
      QCOMPARE(r.exit_code, 2);
      QVERIFY2((r.out + r.err).find("'ln1.weight' is tensor-parallel replicated") != std::string::npos &&
                   (r.out + r.err).find("fp32 differs between tensor ranks 0 and 1") != std::string::npos,
               describe(r).c_str());
      QVERIFY(!fs::exists(dir.file("out_perturbed")));
    }
  }
};

QTEST_GUILESS_MAIN(TestRealdsUniversalParallel)
#include "test_realds_universal_parallel.moc"
