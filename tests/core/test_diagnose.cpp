// The diagnosis on real DeepSpeed checkpoints: healthy fixtures are clean, and copies broken the ways users
// meet them give exactly the right findings, params and ranks.
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/export.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

const char* kFixtures[] = {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2",
                           "bf16opt_zero1_ws2"};

analysis::Report diagnose_dir(const std::string& dir) {
  const auto ckpt = deepspeed::Checkpoint::open(dir);
  analysis::DiagnoseOptions o;
  o.device = DeviceKind::Cpu;
  return deepspeed::diagnose(*ckpt, o);
}

const analysis::Finding* find(const analysis::Report& r, const std::string& code) {
  for (const auto& f : r.findings)
    if (f.code == code) return &f;
  return nullptr;
}

std::string codes(const analysis::Report& r) {
  std::string s;
  for (const auto& f : r.findings)
    s += f.code + "(" + std::string(analysis::severity_name(f.severity)) + ") ";
  return s;
}

// Rewrites one torch file in place with ckptdoc's writer after `edit` changed its tree.
template <typename Fn>
void rewrite(const std::string& path, Fn edit) {
  TorchFile tf = TorchFile::open(path);
  Value root = tf.root;
  edit(root);
  write_torch_file(path, root);
}

Tensor random_like(const Tensor& t, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<uint8_t> bytes(static_cast<size_t>(t.numel()) * 4);
  auto* f = reinterpret_cast<float*>(bytes.data());
  for (int64_t i = 0; i < t.numel(); ++i) f[i] = dist(gen);
  return Tensor::from_bytes(DType::F32, t.shape, std::move(bytes));
}

std::string optim_path(const std::string& tag_dir, int rank, bool bf16 = false) {
  return tag_dir + "/" + (bf16 ? "bf16_" : "") + "zero_pp_rank_" + std::to_string(rank) +
         "_mp_rank_00_optim_states.pt";
}

}  // namespace

class TestDiagnose : public QObject {
  Q_OBJECT

  std::string copy_fixture(test::TempDir& dir, const std::string& name) {
    const std::string dst = dir.file(name);
    test::copy_tree(test::deepspeed_fixture(name) + "/checkpoint", dst);
    return dst;
  }

  // Every rank file under `ckpt` rewritten by `script` (a Python script taking `args`, then SRC DST). Counts
  // into `unaligned` the storages of the rewritten files at an offset that is not a multiple of their element
  // size (copied when read from a zip file, mapped where they are from a legacy one).
  void rewrite_rank_files(const std::string& ckpt, const std::string& script,
                          const std::vector<std::string>& args, int& unaligned) {
    // Every rank file by one run of the script (SRC DST pairs; a torch start is seconds).
    std::vector<std::string> paths, a = args;
    for (const auto& e : fs::recursive_directory_iterator(ckpt))
      if (e.path().extension() == ".pt") paths.push_back(e.path().string());
    for (const auto& path : paths) a.insert(a.end(), {path, path + ".rewritten"});
    QVERIFY(!paths.empty());
    const auto r = test::run_python(test::script(script), a);
    QVERIFY2(r.exit_code == 0, r.err.c_str());
    for (const auto& path : paths) {
      fs::rename(path + ".rewritten", path);
      for (const auto& s : TorchFile::open(path).storages)
        unaligned += s->owned || (s->file && s->file_offset % element_size(s->dtype) != 0) ? 1 : 0;
    }
  }

  // Every fixture with its rank files rewritten so diagnoses like the original: same findings, same per-param
  // statistics.
  void expect_rewritten_diagnose_alike(const std::string& script, const std::vector<std::string>& args,
                                       int& unaligned) {
    for (const char* name : kFixtures) {
      test::TempDir dir;
      const std::string ckpt = copy_fixture(dir, name);
      rewrite_rank_files(ckpt, script, args, unaligned);
      if (QTest::currentTestFailed()) return;
      const auto want = diagnose_dir(test::deepspeed_fixture(name) + "/checkpoint");
      const auto got = diagnose_dir(ckpt);
      QCOMPARE(codes(got), codes(want));
      QCOMPARE(got.params.size(), want.params.size());
      for (size_t i = 0; i < got.params.size(); ++i) {
        const auto &g = got.params[i], &w = want.params[i];
        QCOMPARE(g.name, w.name);
        QCOMPARE(g.lp_vs_fp32.has_value(), w.lp_vs_fp32.has_value());
        if (g.lp_vs_fp32) {
          QCOMPARE(g.lp_vs_fp32->exact, w.lp_vs_fp32->exact);
          QCOMPARE(g.lp_vs_fp32->sum_sq_diff, w.lp_vs_fp32->sum_sq_diff);
        }
        QCOMPARE(g.fp32.has_value(), w.fp32.has_value());
        if (g.fp32) QCOMPARE(g.fp32->sum_sq, w.fp32->sum_sq);
        QCOMPARE(g.exp_avg_sq.has_value(), w.exp_avg_sq.has_value());
        if (g.exp_avg_sq) QCOMPARE(g.exp_avg_sq->sum_sq, w.exp_avg_sq->sum_sq);
      }
    }
  }

 private slots:
  void healthyFixturesHaveNoErrors() {
    for (const char* name : kFixtures) {
      const auto report = diagnose_dir(test::deepspeed_fixture(name) + "/checkpoint");
      QVERIFY2(!report.has_error(), qPrintable(QString(name) + ": " + QString::fromStdString(codes(report))));
      QVERIFY2(!find(report, "fp32-master-drift"), name);
      QCOMPARE(report.params.size(), size_t{8});
      if (std::string(name) != "zero3_fp16_ws2") {
        for (const auto& p : report.params) {
          QVERIFY2(p.lp_vs_fp32.has_value(), p.name.c_str());
          QVERIFY2(p.lp_vs_fp32->exact_fraction() > 0.999, p.name.c_str());
        }
      }
    }
  }

  void healthyFixtureCliExitsZero() {
    auto r = test::run_cli({"diagnose", test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("No problems found") != std::string::npos || r.out.find("ERROR") == std::string::npos);
  }

  void staleMastersAreNamed() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_fp16_ws2");
    for (int rank = 0; rank < 2; ++rank)
      rewrite(optim_path(ckpt + "/global_step5", rank), [&](Value& root) {
        auto& groups =
            root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut();
        for (size_t g = 0; g < groups.size(); ++g)
          groups[g] = Value::tensor(
              random_like(groups[g].as_tensor(), 100 + rank * 10 + static_cast<uint32_t>(g), 0.02f));
      });
    const auto report = diagnose_dir(ckpt);
    const auto* f = find(report, "fp32-master-mismatch");
    QVERIFY2(f, codes(report).c_str());
    QCOMPARE(f->severity, analysis::Severity::Error);
    QCOMPARE(f->repair, analysis::RepairKind::RefreshFp32);
    const std::set<std::string> named(f->params.begin(), f->params.end());
    for (const char* p : {"fc1.weight", "fc2.weight", "fc3.weight", "fc1.bias", "norm.weight", "norm.bias",
                          "fc2.bias", "fc3.bias"})
      QVERIFY2(named.count(p), p);
    QCOMPARE(f->ranks, (std::vector<int>{0, 1}));
    QVERIFY(f->evidence.at("exact_fraction") < 0.01);
    // How masters go stale and their fix are in the source's words (DeepSpeed's: #762 and the repair), which
    // a source without its own replaces by words naming no framework.
    const auto words = deepspeed::Checkpoint::open(ckpt)->catalog().source_rules->stale_master_words();
    QVERIFY2(f->message.find("(" + words.cause + ")") != std::string::npos, f->message.c_str());
    QVERIFY2(f->message.find("(" + words.fix + ")") != std::string::npos, f->message.c_str());
    QVERIFY(words.cause.find("load_optimizer_states=False") != std::string::npos);
    const model::SourceRules::StaleMasterWords neutral;
    QVERIFY(neutral.cause.find("load_checkpoint") == std::string::npos);
    QVERIFY(neutral.fix.find("ckptdoc repair") == std::string::npos);

    auto cli = test::run_cli({"diagnose", ckpt});
    CKPTDOC_EXPECT_EXIT(cli, 1);
    QVERIFY(cli.out.find("fp32-master-mismatch") != std::string::npos);
    auto json = test::run_cli({"diagnose", "--json", ckpt});
    CKPTDOC_EXPECT_EXIT(json, 1);
    QVERIFY(json.out.find("\"code\": \"fp32-master-mismatch\"") != std::string::npos);
  }

  // The optimizer-state findings name a framework only in their source's words (SourceRules::
  // optimizer_state_words): DeepSpeed's say its init step, v0.13+ and load_optimizer_states=False, and a
  // source without its own (DCP, Megatron, Accelerate) gets words naming none.
  void optimizerStateWordsAreTheSources() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_fp16_ws2");
    for (int rank = 0; rank < 2; ++rank)  // the state ZeRO saves right after deepspeed.initialize()
      rewrite(optim_path(ckpt + "/global_step5", rank), [&](Value& root) {
        auto* state = root.get_mut("optimizer_state_dict")->get_mut("base_optimizer_state")->get_mut("state");
        for (auto& [k, entry] : state->dict_mut().items) {
          for (const char* m : {"exp_avg", "exp_avg_sq"}) {
            Value* v = entry.get_mut(m);
            const Tensor& t = v->as_tensor();
            *v = Value::tensor(Tensor::from_bytes(DType::F32, t.shape, std::vector<uint8_t>(t.nbytes(), 0)));
          }
          entry.set("step", Value::integer(1));
        }
      });
    const auto report = diagnose_dir(ckpt);
    const auto* f = find(report, "optimizer-state-fresh");
    QVERIFY2(f, codes(report).c_str());
    const auto words = deepspeed::Checkpoint::open(ckpt)->catalog().source_rules->optimizer_state_words();
    QVERIFY2(f->message.find(" params, as " + words.fresh_cause + ". ") != std::string::npos,
             f->message.c_str());
    QVERIFY(words.fresh_cause.find("deepspeed.initialize()") != std::string::npos);
    QVERIFY(words.empty_cause.find("DeepSpeed v0.13+") != std::string::npos);
    QVERIFY(words.load_without_state.find("load_optimizer_states=False") != std::string::npos);
    QCOMPARE(words.one_step_keeper, std::string("ZeRO"));  // the graft message's subject
    // The 16-bit masters note names DeepSpeed's flag; a source without such words names none.
    const auto opened = deepspeed::Checkpoint::open(ckpt);  // owns the rules: held while they are asked
    const auto rules = opened->catalog().source_rules;
    QCOMPARE(rules->masters_in_16bit_setting(false), std::string("fp16_master_weights_and_grads"));
    QVERIFY(rules->masters_in_16bit_setting(true).find("bf16_master_weights_and_grads") == 0);
    const model::SourceRules neutral_rules;
    QVERIFY(neutral_rules.masters_in_16bit_setting(true).empty() &&
            neutral_rules.masters_in_16bit_setting(false).empty());
    const model::SourceRules::OptimizerStateWords neutral;
    for (const auto* w : {&neutral.empty_cause, &neutral.fresh_cause, &neutral.cast_params,
                          &neutral.cast_measured, &neutral.load_without_state, &neutral.one_step_keeper})
      for (const char* framework :
           {"DeepSpeed", "deepspeed", "ZeRO", "load_checkpoint", "Megatron", "Accelerate"})
        QVERIFY2(w->find(framework) == std::string::npos, w->c_str());
  }

  // Rank files repacked by Python's zipfile (torch.load reads them) keep their records wherever they fall,
  // most not on their element size. Under the sanitizer build this also proves no misaligned float is read.
  void repackedRankFilesDiagnoseLikeTheOriginals() {
    int unaligned = 0;
    expect_rewritten_diagnose_alike("fixtures/make_zip_fixtures.py", {"repack"}, unaligned);
    if (QTest::currentTestFailed()) return;
    QVERIFY(unaligned > 0);  // else this shows nothing
  }

  // Rank files re-saved by torch in its legacy format (DeepSpeed's checkpoint_serialization: false) are
  // mapped in place, storages at odd offsets: the scan gives the same results and never loads a float from a
  // misaligned address (the sanitizer build fails on one).
  void legacyRankFilesDiagnoseLikeTheOriginals() {
    int unaligned = 0;
    expect_rewritten_diagnose_alike("fixtures/resave_legacy.py", {}, unaligned);
    if (QTest::currentTestFailed()) return;
    QVERIFY(unaligned > 0);  // else this shows nothing
  }

  // Exports read the legacy files' values where they are mapped too (ZeRO-3's fp16 weights go to the
  // backend's upcast straight from the file): float32 and float16 exports write the same bytes as from the
  // originals.
  void legacyRankFilesExportLikeTheOriginals() {
    for (const char* name : {"zero3_fp16_ws2", "zero2_fp16_ws2"}) {
      test::TempDir dir;
      const std::string ckpt = copy_fixture(dir, name);
      int unaligned = 0;
      rewrite_rank_files(ckpt, "fixtures/resave_legacy.py", {}, unaligned);
      if (QTest::currentTestFailed()) return;
      QVERIFY(unaligned > 0);
      const auto original = deepspeed::Checkpoint::open(test::deepspeed_fixture(name) + "/checkpoint");
      const auto legacy = deepspeed::Checkpoint::open(ckpt);
      for (DType t : {DType::F32, DType::F16}) {
        const std::string dt(dtype_name(t));
        deepspeed::ExportOptions o;
        o.dtype = t;
        o.device = DeviceKind::Cpu;
        const std::string want = dir.file("want_" + dt + ".safetensors");
        const std::string got = dir.file("got_" + dt + ".safetensors");
        deepspeed::export_weights(*original, want, o);
        deepspeed::export_weights(*legacy, got, o);
        QVERIFY2(test::read_text(got) == test::read_text(want), (name + (" " + dt)).c_str());
      }
    }
  }

  void staleMasterOnOneRankNamesThatRank() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero1_fp16_ws2");
    rewrite(optim_path(ckpt + "/global_step5", 1), [&](Value& root) {
      auto& groups =
          root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut();
      groups[0] = Value::tensor(random_like(groups[0].as_tensor(), 7, 0.05f));
    });
    const auto report = diagnose_dir(ckpt);
    const auto* f = find(report, "fp32-master-mismatch");
    QVERIFY2(f, codes(report).c_str());
    QCOMPARE(f->ranks, std::vector<int>{1});
    // Rank 1 of group 0 holds the tail of fc2.weight and all of fc3.weight (reference layout).
    const std::set<std::string> named(f->params.begin(), f->params.end());
    QCOMPARE(named, (std::set<std::string>{"fc2.weight", "fc3.weight"}));
  }

  void zeroedMomentsWithStepAreInconsistent() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_bf16_ws2");
    for (int rank = 0; rank < 2; ++rank)
      rewrite(optim_path(ckpt + "/global_step5", rank, true), [&](Value& root) {
        auto* state = root.get_mut("optimizer_state_dict")->get_mut("base_optimizer_state")->get_mut("state");
        for (auto& [k, entry] : state->dict_mut().items) {
          Value* sq = entry.get_mut("exp_avg_sq");
          const Tensor& t = sq->as_tensor();
          *sq = Value::tensor(Tensor::from_bytes(DType::F32, t.shape, std::vector<uint8_t>(t.nbytes(), 0)));
        }
      });
    const auto report = diagnose_dir(ckpt);
    const auto* f = find(report, "optimizer-step-inconsistent");
    QVERIFY2(f, codes(report).c_str());
    QCOMPARE(f->severity, analysis::Severity::Error);
    QCOMPARE(f->params.size(), size_t{8});
    QVERIFY(!find(report, "fp32-master-mismatch"));
  }

  // The export's stale-master check (DiagnoseOptions::masters_only) reads the fp16 weights and fp32 masters,
  // 2 + 4 bytes per element, and not the two fp32 moments (8 more): on moments zeroed at step 5 it says
  // nothing about them, and on stale masters it names the same params as the full diagnosis.
  void mastersOnlyReadsNoMoments() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_fp16_ws2");
    analysis::DiagnoseOptions o;
    o.device = DeviceKind::Cpu;
    const auto full = deepspeed::diagnose(*deepspeed::Checkpoint::open(ckpt), o);
    o.masters_only = true;
    const auto masters = deepspeed::diagnose(*deepspeed::Checkpoint::open(ckpt), o);
    QVERIFY2(!masters.has_error(), codes(masters).c_str());
    QCOMPARE(codes(masters), codes(full));  // healthy: the padding not analysed, said by both
    uint64_t compared = 0;
    for (const auto& p : masters.params) {
      QVERIFY2(p.lp_vs_fp32 && !p.exp_avg && !p.exp_avg_sq, p.name.c_str());
      compared += p.lp_vs_fp32->count;
    }
    uint64_t full_compared = 0;
    for (const auto& p : full.params) full_compared += p.lp_vs_fp32->count;
    QCOMPARE(compared, full_compared);
    QCOMPARE(masters.bytes_scanned, compared * (2 + 4));
    QCOMPARE(full.bytes_scanned, compared * (2 + 4 + 8));

    for (int rank = 0; rank < 2; ++rank)
      rewrite(optim_path(ckpt + "/global_step5", rank), [&](Value& root) {
        auto* state = root.get_mut("optimizer_state_dict")->get_mut("base_optimizer_state")->get_mut("state");
        for (auto& [k, entry] : state->dict_mut().items)
          for (const char* m : {"exp_avg", "exp_avg_sq"}) {
            Value* v = entry.get_mut(m);
            const Tensor& t = v->as_tensor();
            *v = Value::tensor(Tensor::from_bytes(DType::F32, t.shape, std::vector<uint8_t>(t.nbytes(), 0)));
          }
      });
    QVERIFY(diagnose_dir(ckpt).has_error());  // the full diagnosis judges the moments
    const auto zeroed = deepspeed::diagnose(*deepspeed::Checkpoint::open(ckpt), o);
    QCOMPARE(codes(zeroed), codes(masters));

    for (int rank = 0; rank < 2; ++rank)
      rewrite(optim_path(ckpt + "/global_step5", rank), [&](Value& root) {
        auto& groups =
            root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut();
        for (size_t g = 0; g < groups.size(); ++g)
          groups[g] = Value::tensor(
              random_like(groups[g].as_tensor(), 200 + rank * 10 + static_cast<uint32_t>(g), 0.02f));
      });
    const auto stale_full = diagnose_dir(ckpt);
    const auto stale = deepspeed::diagnose(*deepspeed::Checkpoint::open(ckpt), o);
    const auto* f = find(stale, "fp32-master-mismatch");
    const auto* g = find(stale_full, "fp32-master-mismatch");
    QVERIFY2(f && g, (codes(stale) + " / " + codes(stale_full)).c_str());
    QCOMPARE(f->params, g->params);
    QCOMPARE(f->ranks, g->ranks);
  }

  void nanInOneRanksSecondMomentIsLocated() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_fp16_ws2");
    rewrite(optim_path(ckpt + "/global_step5", 1), [&](Value& root) {
      auto* state = root.get_mut("optimizer_state_dict")->get_mut("base_optimizer_state")->get_mut("state");
      Value* entry = &state->dict_mut().items[0].second;  // group 0
      const Tensor& t = entry->at("exp_avg_sq").as_tensor();
      std::vector<uint8_t> bytes = t.to_bytes();
      auto* f = reinterpret_cast<float*>(bytes.data());
      f[100] = std::numeric_limits<float>::quiet_NaN();   // inside fc2.weight's tail on rank 1
      f[40000] = std::numeric_limits<float>::infinity();  // inside fc3.weight (rank 1 offsets 39359..41608)
      entry->set("exp_avg_sq", Value::tensor(Tensor::from_bytes(DType::F32, t.shape, std::move(bytes))));
    });
    const auto report = diagnose_dir(ckpt);
    const analysis::Finding* f = nullptr;
    for (const auto& x : report.findings)
      if (x.code == "nonfinite-values") f = &x;
    QVERIFY2(f, codes(report).c_str());
    QCOMPARE(f->ranks, std::vector<int>{1});
    QCOMPARE(std::set<std::string>(f->params.begin(), f->params.end()),
             (std::set<std::string>{"fc2.weight", "fc3.weight"}));
    QCOMPARE(f->evidence.at("count"), 2.0);
    QCOMPARE(f->repair, analysis::RepairKind::ResetOptimizer);
  }

  void truncatedRankFileIsReported() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_fp16_ws2");
    const std::string victim = optim_path(ckpt + "/global_step5", 1);
    fs::resize_file(victim, fs::file_size(victim) / 2);
    const auto report = diagnose_dir(ckpt);
    QVERIFY2(find(report, "rank-file-truncated") || find(report, "rank-file-unreadable"),
             codes(report).c_str());
    QVERIFY(report.has_error());
    auto cli = test::run_cli({"diagnose", ckpt});
    CKPTDOC_EXPECT_EXIT(cli, 1);
  }

  void missingRankIsReported() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero1_fp16_ws2");
    fs::remove(optim_path(ckpt + "/global_step5", 1));
    const auto report = diagnose_dir(ckpt);
    const auto* f = find(report, "rank-file-missing");
    QVERIFY2(f, codes(report).c_str());
    QCOMPARE(f->ranks, std::vector<int>{1});
  }

  void wrongDpWorldSizeIsReported() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_fp16_ws2");
    rewrite(ckpt + "/global_step5/mp_rank_00_model_states.pt",
            [](Value& root) { root.set("dp_world_size", Value::integer(4)); });
    const auto report = diagnose_dir(ckpt);
    QVERIFY2(find(report, "world-size-mismatch"), codes(report).c_str());
  }

  // The multi-GPU schedule, run on CPU backends: each emulated device reads whole rank files, the ranks are
  // shared out by bytes, and the merged report equals the one-queue CPU scan (counts exact, sums to
  // rounding).
  void devicesSplitRankFilesAndMergeToTheSameReport() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", ckpt, "--stage", "2", "--dtype", "bf16", "--dp", "5",
                                       "--params", "300000", "--break", "nan_in_exp_avg_sq"}),
                        0);
    const auto c = deepspeed::Checkpoint::open(ckpt);
    analysis::DiagnoseOptions cpu;
    cpu.device = DeviceKind::Cpu;
    const auto ref = deepspeed::diagnose(*c, cpu);
    QVERIFY(find(ref, "nonfinite-values"));
    QVERIFY(ref.devices.empty());
    for (unsigned devices : {1u, 2u, 3u, 7u}) {
      analysis::DiagnoseOptions o = cpu;
      o.emulated_devices = devices;
      const auto r = deepspeed::diagnose(*c, o);
      QCOMPARE(r.devices.size(), size_t{devices});
      std::multiset<int> ranks;
      uint64_t bytes = 0;
      for (const auto& d : r.devices) {
        ranks.insert(d.ranks.begin(), d.ranks.end());
        bytes += d.bytes;
        QVERIFY(devices > 5 || !d.ranks.empty());  // nobody idle while ranks are left
      }
      QCOMPARE(ranks, (std::multiset<int>{0, 1, 2, 3, 4}));  // every rank file read by exactly one device
      QCOMPARE(bytes, ref.bytes_scanned);
      QCOMPARE(r.bytes_scanned, ref.bytes_scanned);
      QCOMPARE(codes(r), codes(ref));
      QCOMPARE(r.params.size(), ref.params.size());
      for (size_t i = 0; i < r.params.size(); ++i) {
        const auto& a = r.params[i];
        const auto& b = ref.params[i];
        QCOMPARE(a.name, b.name);
        QCOMPARE(a.nonfinite_by_rank, b.nonfinite_by_rank);
        QCOMPARE(a.per_rank.size(), b.per_rank.size());
        for (const auto& [rank, d] : b.per_rank) {
          QCOMPARE(a.per_rank.at(rank).exact, d.exact);
          QCOMPARE(a.per_rank.at(rank).ulp.counts, d.ulp.counts);
        }
        for (auto m : {&analysis::ParamReport::lp, &analysis::ParamReport::fp32,
                       &analysis::ParamReport::exp_avg, &analysis::ParamReport::exp_avg_sq}) {
          QCOMPARE((a.*m).has_value(), (b.*m).has_value());
          if (!(a.*m)) continue;
          QCOMPARE((a.*m)->count, (b.*m)->count);
          QCOMPARE((a.*m)->nan, (b.*m)->nan);
          QCOMPARE((a.*m)->log_abs.counts, (b.*m)->log_abs.counts);
          QCOMPARE((a.*m)->min, (b.*m)->min);
          QCOMPARE((a.*m)->max, (b.*m)->max);
          QVERIFY(std::fabs((a.*m)->sum - (b.*m)->sum) <= 1e-9 * std::max(1.0, std::fabs((b.*m)->sum)));
        }
        QCOMPARE(a.lp_vs_fp32->exact, b.lp_vs_fp32->exact);
        QCOMPARE(a.lp_vs_fp32->log_abs_diff.counts, b.lp_vs_fp32->log_abs_diff.counts);
        QCOMPARE(a.lp_vs_fp32->max_abs, b.lp_vs_fp32->max_abs);
      }
    }
  }

  // One flipped bit inside a tensor record: the values still look plausible, so only the CRC-32 check of
  // --verify-checksums sees it, and it names the file, the record and the rank.
  void flippedBitIsFoundByTheChecksumPass() {
    for (const char* name : kFixtures) {
      analysis::DiagnoseOptions o;
      o.device = DeviceKind::Cpu;
      o.verify_checksums = true;
      const auto clean =
          deepspeed::diagnose(*deepspeed::Checkpoint::open(test::deepspeed_fixture(name) + "/checkpoint"), o);
      QVERIFY2(!find(clean, "checksum-mismatch"), name);
    }
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_fp16_ws2");
    const std::string victim = optim_path(ckpt + "/global_step5", 1);
    const std::string record =
        test::flip_bits_in_first_data_record(victim, 100, 0x01);  // lowest mantissa bit
    analysis::DiagnoseOptions o;
    o.device = DeviceKind::Cpu;
    QVERIFY(!find(deepspeed::diagnose(*deepspeed::Checkpoint::open(ckpt), o), "checksum-mismatch"));
    o.verify_checksums = true;
    const auto report = deepspeed::diagnose(*deepspeed::Checkpoint::open(ckpt), o);
    const auto* f = find(report, "checksum-mismatch");
    QVERIFY2(f, codes(report).c_str());
    QCOMPARE(f->severity, analysis::Severity::Error);
    QCOMPARE(f->ranks, std::vector<int>{1});
    QVERIFY2(f->message.find(fs::path(victim).filename().string()) != std::string::npos, f->message.c_str());
    QVERIFY2(f->message.find("'" + record + "'") != std::string::npos, f->message.c_str());
    QVERIFY2(f->message.find("1 of ") != std::string::npos, f->message.c_str());

    auto cli = test::run_cli({"diagnose", "--verify-checksums", ckpt});
    CKPTDOC_EXPECT_EXIT(cli, 1);
    QVERIFY2(cli.out.find("checksum-mismatch") != std::string::npos, cli.out.c_str());
  }

  // --device auto on a CUDA build without a usable GPU runs on the CPU; it says why once on stderr only where
  // an NVIDIA driver is loaded (a machine without one got a driver error on every command); --device cpu says
  // nothing; --device cuda is a clear error.
  void autoDeviceSaysOnceWhenItFallsBackToTheCpu() {
    const std::string ckpt = test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint";
    std::string reason;
    const bool gpu = cuda_available(&reason);
    const auto autodev = test::run_cli({"diagnose", ckpt});
    CKPTDOC_EXPECT_EXIT(autodev, 0);
    const auto cpu = test::run_cli({"diagnose", "--device", "cpu", ckpt});
    CKPTDOC_EXPECT_EXIT(cpu, 0);
    QVERIFY2(cpu.err.find("CUDA") == std::string::npos, cpu.err.c_str());
    if (gpu) {
      QVERIFY2(autodev.out.find("CUDA") != std::string::npos, autodev.out.c_str());
      return;
    }
    const std::string line = "no usable CUDA device (" + reason + "); running on the CPU";
    std::error_code ec;
    if (reason == "built without CUDA" || !std::filesystem::exists("/proc/driver/nvidia/version", ec)) {
      QVERIFY2(autodev.err.find("CUDA") == std::string::npos, autodev.err.c_str());
    } else {
      const size_t at = autodev.err.find(line);
      QVERIFY2(at != std::string::npos, autodev.err.c_str());
      QVERIFY2(autodev.err.find(line, at + 1) == std::string::npos, autodev.err.c_str());  // once
    }
    const auto cuda = test::run_cli({"diagnose", "--device", "cuda", ckpt});
    CKPTDOC_EXPECT_EXIT(cuda, 2);
    QVERIFY2(cuda.err.find("no usable CUDA device") != std::string::npos, cuda.err.c_str());
  }

  void cancelStopsTheScan() {
    const auto ckpt = deepspeed::Checkpoint::open(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint");
    Progress progress;
    progress.cancel();
    QVERIFY_THROWS_EXCEPTION(Cancelled, deepspeed::diagnose(*ckpt, {}, &progress));
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestDiagnose)
#include "test_diagnose.moc"
