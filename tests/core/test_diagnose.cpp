// The diagnosis on real DeepSpeed checkpoints: healthy fixtures are clean, and copies broken the ways users
// meet them give exactly the right findings, params and ranks.
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/format/torch_file.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

const char* kFixtures[] = {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2", "bf16opt_zero1_ws2"};

analysis::Report diagnose_dir(const std::string& dir) {
  const auto ckpt = deepspeed::Checkpoint::open(dir);
  analysis::DiagnoseOptions o;
  o.device = DeviceKind::Cpu;
  return analysis::diagnose(*ckpt, o);
}

const analysis::Finding* find(const analysis::Report& r, const std::string& code) {
  for (const auto& f : r.findings)
    if (f.code == code) return &f;
  return nullptr;
}

std::string codes(const analysis::Report& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.code + "(" + std::string(analysis::severity_name(f.severity)) + ") ";
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
  return tag_dir + "/" + (bf16 ? "bf16_" : "") + "zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_optim_states.pt";
}

}  // namespace

class TestDiagnose : public QObject {
  Q_OBJECT

  std::string copy_fixture(test::TempDir& dir, const std::string& name) {
    const std::string dst = dir.file(name);
    test::copy_tree(test::deepspeed_fixture(name) + "/checkpoint", dst);
    return dst;
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
        auto& groups = root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut();
        for (size_t g = 0; g < groups.size(); ++g)
          groups[g] = Value::tensor(random_like(groups[g].as_tensor(), 100 + rank * 10 + static_cast<uint32_t>(g), 0.02f));
      });
    const auto report = diagnose_dir(ckpt);
    const auto* f = find(report, "fp32-master-mismatch");
    QVERIFY2(f, codes(report).c_str());
    QCOMPARE(f->severity, analysis::Severity::Error);
    QCOMPARE(f->repair, analysis::RepairKind::RefreshFp32);
    const std::set<std::string> named(f->params.begin(), f->params.end());
    for (const char* p : {"fc1.weight", "fc2.weight", "fc3.weight", "fc1.bias", "norm.weight", "norm.bias", "fc2.bias", "fc3.bias"})
      QVERIFY2(named.count(p), p);
    QCOMPARE(f->ranks, (std::vector<int>{0, 1}));
    QVERIFY(f->evidence.at("exact_fraction") < 0.01);

    auto cli = test::run_cli({"diagnose", ckpt});
    CKPTDOC_EXPECT_EXIT(cli, 1);
    QVERIFY(cli.out.find("fp32-master-mismatch") != std::string::npos);
    auto json = test::run_cli({"diagnose", "--json", ckpt});
    CKPTDOC_EXPECT_EXIT(json, 1);
    QVERIFY(json.out.find("\"code\": \"fp32-master-mismatch\"") != std::string::npos);
  }

  void staleMasterOnOneRankNamesThatRank() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero1_fp16_ws2");
    rewrite(optim_path(ckpt + "/global_step5", 1), [&](Value& root) {
      auto& groups = root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut();
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
    QCOMPARE(std::set<std::string>(f->params.begin(), f->params.end()), (std::set<std::string>{"fc2.weight", "fc3.weight"}));
    QCOMPARE(f->evidence.at("count"), 2.0);
    QCOMPARE(f->repair, analysis::RepairKind::ResetOptimizer);
  }

  void truncatedRankFileIsReported() {
    test::TempDir dir;
    const std::string ckpt = copy_fixture(dir, "zero2_fp16_ws2");
    const std::string victim = optim_path(ckpt + "/global_step5", 1);
    const std::string record = test::flip_bits_in_first_data_record(victim, 100, 0x01);  // lowest mantissa bit
    analysis::DiagnoseOptions o;
    o.device = DeviceKind::Cpu;
    QVERIFY(!find(analysis::diagnose(*deepspeed::Checkpoint::open(ckpt), o), "checksum-mismatch"));
    o.verify_checksums = true;
    const auto report = analysis::diagnose(*deepspeed::Checkpoint::open(ckpt), o);
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

  void cancelStopsTheScan() {
    const auto ckpt = deepspeed::Checkpoint::open(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint");
    Progress progress;
    progress.cancel();
    QVERIFY_THROWS_EXCEPTION(Cancelled, analysis::diagnose(*ckpt, {}, &progress));
  }
};

QTEST_APPLESS_MAIN(TestDiagnose)
#include "test_diagnose.moc"
