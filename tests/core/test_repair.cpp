// Repairs on real DeepSpeed fixtures (copies) and synthesized checkpoints: every output re-opens,
// re-diagnoses clean and satisfies the loader invariants; values are checked exactly (refresh: fp32 ==
// upcast(lp); repartition round trips: fp32 and moments bit for bit); failures and cancels leave nothing
// behind.
#include <unistd.h>

#include <QtTest>
#include <cstring>
#include <filesystem>

#include "cancel_at_dir_sync_io.h"
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/io/fault_injection.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/synthesize.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

const char* kFixtures[] = {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2",
                           "bf16opt_zero1_ws2"};

std::string copy_fixture(const test::TempDir& dir, const std::string& name) {
  const std::string to = dir.file(name);
  test::copy_tree(test::deepspeed_fixture(name) + "/checkpoint", to);
  return to;
}

std::string synth(const test::TempDir& dir, const std::string& name, int stage, DType dtype, int dp,
                  deepspeed::SynthBreak brk = deepspeed::SynthBreak::None, int layers = 1,
                  int64_t hidden = 12, bool bf16_optimizer = false, uint64_t seed = 1) {
  deepspeed::SynthOptions o;
  o.stage = stage;
  o.dtype = dtype;
  o.dp = dp;
  o.layers = layers;
  o.hidden = hidden;
  o.breakage = brk;
  o.bf16_optimizer = bf16_optimizer;
  o.seed = seed;
  o.global_steps = 7;
  deepspeed::write_synthetic_checkpoint(dir.file(name), o);
  return dir.file(name);
}

std::string codes(const analysis::Report& r) {
  std::string s;
  for (const auto& f : r.findings)
    s += f.code + "(" + std::string(analysis::severity_name(f.severity)) + ") ";
  return s;
}

analysis::Report diagnose_dir(const std::string& dir) {
  analysis::DiagnoseOptions o;
  o.device = DeviceKind::Cpu;
  return deepspeed::diagnose(*deepspeed::Checkpoint::open(dir), o);
}

repair::RepairResult run(const std::string& in, const std::string& out, repair::RepairRequest rq) {
  rq.device = DeviceKind::Cpu;
  auto ckpt = deepspeed::Checkpoint::open(in);
  return repair::run_repair(*ckpt, out, rq);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

#define VERIFY_REPAIRED(expr)                                                               \
  do {                                                                                      \
    const repair::RepairResult& result_ = (expr);                                           \
    QVERIFY2(result_.verified_clean, codes(result_.verification).c_str());                  \
    QVERIFY2(result_.invariant_failures.empty(), join(result_.invariant_failures).c_str()); \
  } while (0)

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// Every trainable param's fp32 master equals float(lp) exactly.
QString fp32_matches_lp(const std::string& dir) {
  auto ck = deepspeed::Checkpoint::open(dir);
  const auto& cat = ck->catalog();
  for (size_t g = 0; g < cat.groups.size(); ++g)
    for (size_t i = 0; i < cat.groups[g].params.size(); ++i) {
      const auto pd = ck->assemble(static_cast<int>(g), static_cast<int>(i), false);
      if (!pd.lp) return QString("no lp for %1").arg(pd.name.c_str());
      const auto lp = pd.lp->to_float();
      if (!bits_equal(lp, pd.fp32)) return QString("fp32 != upcast(lp) for %1").arg(pd.name.c_str());
    }
  return {};
}

// Per-param fp32 and moments of two checkpoints (any layouts) are bit-identical; `only` restricts to names.
QString same_state(const std::string& a, const std::string& b, bool with_moments = true) {
  auto ca = deepspeed::Checkpoint::open(a), cb = deepspeed::Checkpoint::open(b);
  const auto& A = ca->catalog();
  int n = 0;
  for (size_t g = 0; g < A.groups.size(); ++g)
    for (size_t i = 0; i < A.groups[g].params.size(); ++i) {
      const auto pa = ca->assemble(static_cast<int>(g), static_cast<int>(i), with_moments);
      const auto loc = cb->catalog().find_param(pa.name);
      if (!loc) return QString("%1 missing").arg(pa.name.c_str());
      const auto pb = cb->assemble(loc->first, loc->second, with_moments);
      if (!bits_equal(pa.fp32, pb.fp32)) return QString("fp32 differs for %1").arg(pa.name.c_str());
      if (with_moments && (!bits_equal(pa.exp_avg, pb.exp_avg) || !bits_equal(pa.exp_avg_sq, pb.exp_avg_sq)))
        return QString("moments differ for %1").arg(pa.name.c_str());
      ++n;
    }
  if (n == 0) return "no params";
  return {};
}

bool has_finding(const analysis::Report& r, const std::string& code) {
  for (const auto& f : r.findings)
    if (f.code == code) return true;
  return false;
}

// Every file under `dir` with its bytes, to prove a folder was left exactly as it was.
std::map<std::string, std::string> tree_bytes(const std::string& dir) {
  std::map<std::string, std::string> files;
  if (!fs::exists(dir)) return {{"(no folder)", dir}};
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = test::read_text(e.path().string());
  return files;
}

bool partial_left(const std::string& parent) {
  for (const auto& e : fs::directory_iterator(parent))
    for (const char* kind : {".ckptdoc-partial-", ".ckptdoc-replaced-"})
      if (e.path().filename().string().find(kind) != std::string::npos) return true;
  return false;
}

}  // namespace

class TestRepair : public QObject {
  Q_OBJECT

 private slots:
  void synthesizedCheckpointsAreHealthy() {
    test::TempDir dir;
    int n = 0;
    for (int stage : {1, 2, 3})
      for (DType dt : {DType::F16, DType::BF16})
        for (int dp : {1, 2, 3, 4}) {
          const auto p = synth(dir, "s" + std::to_string(n++), stage, dt, dp);
          const auto report = diagnose_dir(p);
          QVERIFY2(!report.has_error(), (p + ": " + codes(report)).c_str());
          const auto inv = repair::check_loader_invariants(*deepspeed::Checkpoint::open(p));
          QVERIFY2(inv.empty(), join(inv).c_str());
        }
    for (int dp : {1, 3}) {
      const auto p = synth(dir, "b" + std::to_string(dp), 1, DType::BF16, dp, {}, 1, 12, true);
      QVERIFY2(!diagnose_dir(p).has_error(), codes(diagnose_dir(p)).c_str());
      QVERIFY(repair::check_loader_invariants(*deepspeed::Checkpoint::open(p)).empty());
    }
  }

  void synthesizedBreakagesAreDiagnosed() {
    test::TempDir dir;
    using B = deepspeed::SynthBreak;
    QVERIFY(has_finding(diagnose_dir(synth(dir, "stale", 2, DType::F16, 2, B::StaleFp32)),
                        "fp32-master-mismatch"));
    QVERIFY(diagnose_dir(synth(dir, "nan", 2, DType::F16, 2, B::NanInExpAvgSq)).has_error());
    QVERIFY(diagnose_dir(synth(dir, "zero", 2, DType::F16, 2, B::ZeroMomentsWithStep)).has_error());
    QVERIFY(diagnose_dir(synth(dir, "wrongdp", 2, DType::F16, 2, B::WrongDpWorldSize)).has_error());
    QVERIFY(diagnose_dir(synth(dir, "missing", 2, DType::F16, 2, B::MissingRank)).has_error());
    QVERIFY(diagnose_dir(synth(dir, "trunc", 2, DType::F16, 2, B::TruncateRank)).has_error());
  }

  void refreshFixesStaleFp32OnSynthesized() {
    test::TempDir dir;
    int n = 0;
    for (int stage : {1, 2})
      for (DType dt : {DType::F16, DType::BF16})
        for (int dp : {1, 2, 3, 4}) {
          const auto in =
              synth(dir, "in" + std::to_string(n), stage, dt, dp, deepspeed::SynthBreak::StaleFp32);
          QVERIFY(diagnose_dir(in).has_error());
          repair::RepairRequest rq;
          rq.refresh_fp32 = true;
          const auto out = dir.file("out" + std::to_string(n++));
          const auto r = run(in, out, rq);
          VERIFY_REPAIRED(r);
          const QString why = fp32_matches_lp(out);
          QVERIFY2(why.isEmpty(), qPrintable(why));
        }
    const auto in = synth(dir, "bf16opt", 1, DType::BF16, 3, deepspeed::SynthBreak::StaleFp32, 1, 12, true);
    repair::RepairRequest rq;
    rq.refresh_fp32 = true;
    const auto r = run(in, dir.file("bf16opt-out"), rq);
    VERIFY_REPAIRED(r);
    QVERIFY(fp32_matches_lp(dir.file("bf16opt-out")).isEmpty());
  }

  void refreshOnFixtures() {
    for (const char* name : {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "bf16opt_zero1_ws2"}) {
      test::TempDir dir;
      const auto in = copy_fixture(dir, name);
      repair::RepairRequest rq;
      rq.refresh_fp32 = true;
      const auto r = run(in, dir.file("out"), rq);
      VERIFY_REPAIRED(r);
      const QString why = fp32_matches_lp(dir.file("out"));
      QVERIFY2(why.isEmpty(), qPrintable(QString(name) + ": " + why));
    }
  }

  void refreshZero3FromConsolidatedWeights() {
    test::TempDir dir;
    const auto in = copy_fixture(dir, "zero3_fp16_ws2");
    repair::RepairRequest rq;
    rq.refresh_fp32 = true;
    rq.lp_source = test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint.zero_to_fp32.bin";
    const auto r = run(in, dir.file("out"), rq);
    VERIFY_REPAIRED(r);
    // zero_to_fp32's output is the fp32 masters themselves, so refreshing from it reproduces them.
    const QString why = same_state(in, dir.file("out"));
    QVERIFY2(why.isEmpty(), qPrintable(why));
  }

  void refreshZero3WithoutSourceIsRefused() {
    auto ckpt = deepspeed::Checkpoint::open(test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint");
    test::TempDir dir;
    repair::RepairRequest rq;
    rq.refresh_fp32 = true;
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ckpt, dir.file("out"), rq));
  }

  void resetOptimizerOnEveryFixture() {
    for (const char* name : kFixtures) {
      test::TempDir dir;
      const auto in = copy_fixture(dir, name);
      repair::RepairRequest rq;
      rq.reset_optimizer = true;
      const auto r = run(in, dir.file("out"), rq);
      VERIFY_REPAIRED(r);
      auto out = deepspeed::Checkpoint::open(dir.file("out"));
      const Value& osd = out->optimizer_state(0);
      const Value* inner =
          osd.get("base_optimizer_state") ? osd.get("base_optimizer_state") : osd.get("optimizer_state_dict");
      QVERIFY(inner && inner->get("state") && inner->get("state")->as_dict().items.empty());
      QVERIFY2(same_state(in, dir.file("out"), false).isEmpty(), name);  // masters untouched
    }
  }

  void resetFixesZeroMomentsWithStep() {
    test::TempDir dir;
    const auto in = synth(dir, "in", 2, DType::BF16, 3, deepspeed::SynthBreak::ZeroMomentsWithStep);
    repair::RepairRequest rq;
    rq.reset_optimizer = true;
    VERIFY_REPAIRED(run(in, dir.file("out"), rq));
  }

  void dropOptimizerOnFixtures() {
    for (const char* name : {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "bf16opt_zero1_ws2"}) {
      test::TempDir dir;
      const auto in = copy_fixture(dir, name);
      repair::RepairRequest rq;
      rq.drop_optimizer = true;
      const auto r = run(in, dir.file("out"), rq);
      VERIFY_REPAIRED(r);
      auto out = deepspeed::Checkpoint::open(dir.file("out"));
      QCOMPARE(out->catalog().optim_file_count, 0);
      for (const auto& e : fs::directory_iterator(out->catalog().tag_dir))
        QVERIFY(e.path().filename().string().find("optim_states") == std::string::npos);
    }
    auto z3 = deepspeed::Checkpoint::open(test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint");
    test::TempDir dir;
    repair::RepairRequest rq;
    rq.drop_optimizer = true;
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*z3, dir.file("out"), rq));
  }

  void repartitionRoundTripIsBitExactOnFixtures() {
    for (const char* name : kFixtures) {
      test::TempDir dir;
      const auto in = copy_fixture(dir, name);
      repair::RepairRequest rq;
      rq.world_size = 3;
      const auto r3 = run(in, dir.file("dp3"), rq);
      VERIFY_REPAIRED(r3);
      QCOMPARE(deepspeed::Checkpoint::open(dir.file("dp3"))->catalog().optim_file_count, 3);
      QVERIFY2(same_state(in, dir.file("dp3")).isEmpty(), name);
      rq.world_size = 2;
      const auto r2 = run(dir.file("dp3"), dir.file("dp2"), rq);
      VERIFY_REPAIRED(r2);
      const QString why = same_state(in, dir.file("dp2"));
      QVERIFY2(why.isEmpty(), qPrintable(QString(name) + ": " + why));
    }
  }

  void repartitionSynthesized() {
    test::TempDir dir;
    int n = 0;
    for (int stage : {1, 2, 3})
      for (DType dt : {DType::F16, DType::BF16})
        for (auto [from, to] : {std::pair{2, 4}, std::pair{4, 3}, std::pair{1, 2}, std::pair{3, 1}}) {
          const auto in = synth(dir, "in" + std::to_string(n), stage, dt, from);
          repair::RepairRequest rq;
          rq.world_size = to;
          const auto out = dir.file("out" + std::to_string(n++));
          VERIFY_REPAIRED(run(in, out, rq));
          QCOMPARE(deepspeed::Checkpoint::open(out)->catalog().dp_world_size, to);
          const QString why = same_state(in, out);
          QVERIFY2(why.isEmpty(), qPrintable(why));
        }
  }

  void graftAddsLayers() {
    test::TempDir dir;
    const auto src = synth(dir, "src", 2, DType::F16, 2, {}, 1, 16, false, 1);
    const auto tmpl = synth(dir, "tmpl", 2, DType::F16, 3, {}, 2, 16, false, 9);
    repair::RepairRequest rq;
    rq.target = tmpl;
    const auto r = run(src, dir.file("out"), rq);
    // New params have zero moments under a continuing step: the only error diagnose may report, and only
    // for new params; with --reset-optimizer the output is clean.
    for (const auto& f : r.verification.findings) {
      if (f.severity != analysis::Severity::Error) continue;
      QCOMPARE(f.code, std::string("optimizer-step-inconsistent"));
      for (const auto& p : f.params) QVERIFY2(p.rfind("layers.1.", 0) == 0, p.c_str());
    }
    QVERIFY(r.invariant_failures.empty());
    QCOMPARE(r.plan.warnings.size(), size_t{1});
    rq.reset_optimizer = true;
    VERIFY_REPAIRED(run(src, dir.file("out-reset"), rq));
    rq.reset_optimizer = false;
    auto out = deepspeed::Checkpoint::open(dir.file("out"));
    auto s = deepspeed::Checkpoint::open(src);
    auto t = deepspeed::Checkpoint::open(tmpl);
    QCOMPARE(out->catalog().dp_world_size, 3);
    for (size_t g = 0; g < out->catalog().groups.size(); ++g)
      for (size_t i = 0; i < out->catalog().groups[g].params.size(); ++i) {
        const auto po = out->assemble(static_cast<int>(g), static_cast<int>(i));
        if (auto loc = s->catalog().find_param(po.name)) {
          const auto ps = s->assemble(loc->first, loc->second);
          QVERIFY2(bits_equal(po.fp32, ps.fp32) && bits_equal(po.exp_avg, ps.exp_avg), po.name.c_str());
          QVERIFY2(bits_equal(po.lp->to_float(), ps.lp->to_float()), po.name.c_str());
        } else {
          const auto loc2 = t->catalog().find_param(po.name);
          QVERIFY(loc2);
          const auto pt = t->assemble(loc2->first, loc2->second);
          QVERIFY2(bits_equal(po.fp32, pt.fp32), po.name.c_str());
          for (float v : po.exp_avg) QCOMPARE(v, 0.0f);
        }
      }
  }

  void graftWarnsAboutRemovedAndRefusesReshaped() {
    test::TempDir dir;
    const auto src = synth(dir, "src", 1, DType::BF16, 2, {}, 2, 16);
    const auto small = synth(dir, "small", 1, DType::BF16, 2, {}, 1, 16, false, 3);
    repair::RepairRequest rq;
    rq.target = small;
    rq.reset_optimizer = true;
    const auto r = run(src, dir.file("out"), rq);
    VERIFY_REPAIRED(r);
    QVERIFY(!r.plan.warnings.empty());
    QVERIFY(r.plan.warnings.front().find("layers.1.") != std::string::npos);

    const auto wide = synth(dir, "wide", 1, DType::BF16, 2, {}, 2, 24);
    rq.target = wide;
    auto ck = deepspeed::Checkpoint::open(src);
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ck, dir.file("out2"), rq));
    rq.allow_shape_change = true;
    VERIFY_REPAIRED(run(src, dir.file("out2"), rq));
  }

  void planRefusesUnsafeOutputs() {
    test::TempDir dir;
    const auto in = synth(dir, "in", 2, DType::F16, 2);
    auto ck = deepspeed::Checkpoint::open(in);
    repair::RepairRequest rq;
    rq.reset_optimizer = true;
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ck, in, rq));
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ck, in + "/global_step7/out", rq));
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ck, dir.path(), rq));  // contains the input
    fs::create_directories(dir.file("busy"));
    test::write_text(dir.file("busy/x"), "x");
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ck, dir.file("busy"), rq));
    rq.force = true;  // --force replaces a checkpoint folder only, never other files
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ck, dir.file("busy"), rq));
    test::copy_tree(in, dir.file("old-ckpt"));
    repair::make_plan(*ck, dir.file("old-ckpt"), rq);
    repair::RepairRequest none;
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ck, dir.file("o"), none));
    repair::RepairRequest both;
    both.drop_optimizer = true;
    both.reset_optimizer = true;
    QVERIFY_THROWS_EXCEPTION(Error, repair::make_plan(*ck, dir.file("o"), both));
    fs::create_directories(dir.file("empty"));
    rq.force = false;
    const auto plan = repair::make_plan(*ck, dir.file("empty"), rq);
    QVERIFY(!plan.text().empty());
    QCOMPARE(plan.files.back().path, std::string("latest"));
  }

  void forceReplacesExistingOutput() {
    test::TempDir dir;
    const auto in = synth(dir, "in", 2, DType::F16, 2, deepspeed::SynthBreak::StaleFp32);
    // An earlier output (a DeepSpeed checkpoint folder) is replaced...
    test::copy_tree(in, dir.file("out"));
    const std::string stale = dir.file("out/global_step7/zero_pp_rank_1_mp_rank_00_optim_states.pt");
    QVERIFY(fs::exists(stale));
    repair::RepairRequest rq;
    rq.refresh_fp32 = true;
    rq.force = true;
    VERIFY_REPAIRED(run(in, dir.file("out"), rq));
    // ...but a folder with anything else in it is refused and left alone.
    test::write_text(dir.file("out/old"), "old");
    QVERIFY_THROWS_EXCEPTION(Error, run(in, dir.file("out"), rq));
    QCOMPARE(test::read_text(dir.file("out/old")), std::string("old"));
  }

  void failedWritesLeaveNothing() {
    test::TempDir dir;
    const auto in = synth(dir, "in", 2, DType::F16, 2, deepspeed::SynthBreak::StaleFp32);
    const auto before = test::read_text(in + "/latest");
    int fired = 0;
    for (uint64_t at = 1; at < 200; at += 3) {
      FaultPlan plan;
      plan.at_call = at;
      FaultyIo io(posix_io(), plan);
      repair::RepairRequest rq;
      rq.refresh_fp32 = true;
      rq.device = DeviceKind::Cpu;
      auto ck = deepspeed::Checkpoint::open(in);
      const auto out = dir.file("out" + std::to_string(at));
      bool threw = false;
      try {
        repair::run_repair(*ck, out, rq, nullptr, io);
      } catch (const Error&) {
        threw = true;
      }
      if (!io.fired()) break;
      ++fired;
      QVERIFY2(threw, qPrintable(QString("call %1 failed silently").arg(at)));
      QVERIFY2(!fs::exists(out), qPrintable(QString("output left after failing call %1").arg(at)));
      QVERIFY(!partial_left(dir.path()));
    }
    QVERIFY(fired > 3);
    QCOMPARE(test::read_text(in + "/latest"), before);
    QVERIFY(!diagnose_dir(in).findings.empty());  // input untouched: still stale
  }

  // A folder named as this run's partial folder ("<out>.ckptdoc-partial-<pid>") was removed before the run
  // made its own. On storage shared between hosts it may be a live writer's with the same pid: now it is
  // refused and left as it is, by the repair and by the conversion to universal.
  void aFolderNamedAsThisRunsPartialIsNeverRemoved() {
    test::TempDir dir;
    const auto in = copy_fixture(dir, "zero2_fp16_ws2");
    const std::string out = dir.file("out");
    const std::string theirs = out + ".ckptdoc-partial-" + std::to_string(::getpid()) + "/rank0.pt";
    fs::create_directories(fs::path(theirs).parent_path());
    test::write_text(theirs, "another host's writer");
    repair::RepairRequest rq;
    rq.refresh_fp32 = true;
    try {
      run(in, out, rq);
      QFAIL("the repair wrote beside a partial folder it did not make");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::OutputExists);
    }
    universal::ToUniversalOptions uo;
    uo.device = DeviceKind::Cpu;
    try {
      universal::convert_to_universal(*deepspeed::Checkpoint::open(in), out, uo);
      QFAIL("the conversion wrote beside a partial folder it did not make");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::OutputExists);
    }
    QCOMPARE(test::read_text(theirs), std::string("another host's writer"));
    QVERIFY(!fs::exists(out));
  }

  // --force replacing an earlier output, with a write failing at each call in turn: the earlier output must
  // stay whole. The conversion to universal deleted it before its rename, so a failed rename lost it.
  void failedReplacementsKeepTheEarlierOutput() {
    test::TempDir dir;
    const auto in = copy_fixture(dir, "zero2_fp16_ws2");
    const std::string out = dir.file("out");
    test::copy_tree(in, out);  // the earlier output: a DeepSpeed checkpoint, which --force may replace
    const auto before = tree_bytes(out);
    int fired = 0;
    // Every call of the kinds that publish (each rename, each directory fsync), and every 7th call of any
    // kind.
    for (const auto& [calls, step] :
         {std::pair<std::string, uint64_t>{"rename", 1}, {"fsync_dir", 1}, {"any", 7}})
      for (uint64_t at = 1; at < 400; at += step) {
        FaultPlan plan;
        plan.at_call = at;
        plan.calls = calls;
        FaultyIo io(posix_io(), plan);
        universal::ToUniversalOptions uo;
        uo.device = DeviceKind::Cpu;
        uo.force = true;
        bool threw = false;
        try {
          universal::convert_to_universal(*deepspeed::Checkpoint::open(in), out, uo, nullptr, io);
        } catch (const Error&) {
          threw = true;
        }
        if (!io.fired()) {  // no call of this kind was left to fail: it published, so the earlier output is
                            // back
          fs::remove_all(out);
          test::copy_tree(in, out);
          break;
        }
        ++fired;
        const QString where = QString::fromStdString(calls) + QString(" call %1").arg(at);
        QVERIFY2(threw, qPrintable(where + " failed silently"));
        QVERIFY2(tree_bytes(out) == before, qPrintable("the earlier output changed at " + where));
        QVERIFY(!partial_left(dir.path()));
      }
    QVERIFY(fired > 3);
  }

  // A Cancel that arrives after the last write's own check (here: at the first directory fsync, when every
  // file is written) must still leave nothing: before, the folder was published and the result returned
  // (the ImGui convert window then said nothing of the Cancel; CI's convertCancelledWritesNothing).
  void cancelAfterTheLastWriteLeavesNothing_data() {
    QTest::addColumn<bool>("convert");
    QTest::newRow("convert --to universal") << true;
    QTest::newRow("repair --world-size") << false;
  }
  void cancelAfterTheLastWriteLeavesNothing() {
    QFETCH(bool, convert);
    test::TempDir dir;
    const auto in = convert ? copy_fixture(dir, "zero2_fp16_ws2") : synth(dir, "in", 2, DType::F16, 2);
    Progress progress;
    test::CancelAtDirSyncIo io(progress);
    const std::string out = dir.file("out");
    if (convert) {
      universal::ToUniversalOptions uo;
      uo.device = DeviceKind::Cpu;
      QVERIFY_THROWS_EXCEPTION(Cancelled, universal::convert_to_universal(*deepspeed::Checkpoint::open(in),
                                                                          out, uo, &progress, io));
    } else {
      repair::RepairRequest rq;
      rq.world_size = 3;
      rq.device = DeviceKind::Cpu;
      QVERIFY_THROWS_EXCEPTION(Cancelled,
                               repair::run_repair(*deepspeed::Checkpoint::open(in), out, rq, &progress, io));
    }
    QVERIFY(io.cancelled);  // else the test shows nothing
    QVERIFY(!fs::exists(out));
    QVERIFY(!partial_left(dir.path()));
  }

  void cancelLeavesNothing() {
    test::TempDir dir;
    const auto in = synth(dir, "in", 2, DType::F16, 2);
    auto ck = deepspeed::Checkpoint::open(in);
    Progress progress;
    progress.cancel();
    repair::RepairRequest rq;
    rq.world_size = 3;
    rq.device = DeviceKind::Cpu;
    QVERIFY_THROWS_EXCEPTION(Cancelled, repair::run_repair(*ck, dir.file("out"), rq, &progress));
    QVERIFY(!fs::exists(dir.file("out")));
    QVERIFY(!partial_left(dir.path()));
  }

  void writerObjectsMatchDeepSpeed() {
    QCOMPARE(deepspeed::zero_stage_of(deepspeed::zero_stage_object(2)).value_or(-1), 2);
    QCOMPARE(deepspeed::zero_stage_of(deepspeed::zero_stage_object(3)).value_or(-1), 3);
    const auto fa = deepspeed::fragment_address_of(deepspeed::fragment_address_object(5, 7));
    QVERIFY(fa && fa->first == 5 && fa->second == 7);
    QCOMPARE(deepspeed::archive_name_for("/x/mp_rank_00_model_states.pt"),
             std::string("mp_rank_00_model_states"));
    QCOMPARE(deepspeed::model_file_name(3, 1), std::string("zero_pp_rank_1_mp_rank_00_model_states.pt"));
    QCOMPARE(deepspeed::optim_file_name(true, 0),
             std::string("bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"));
    // The fixture's own optimizer file: our zero_stage reader understands DeepSpeed's getattr form.
    TorchFile tf = TorchFile::open(test::deepspeed_fixture("zero2_fp16_ws2") +
                                   "/checkpoint/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt");
    QCOMPARE(deepspeed::zero_stage_of(tf.root.at("optimizer_state_dict").at("zero_stage")).value_or(-1), 2);
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestRepair)
#include "test_repair.moc"
