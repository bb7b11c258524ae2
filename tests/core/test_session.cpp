// The core session behind both views: jobs run on workers and end exactly once, on the thread that polls;
// a lane runs one job at a time and a newer request supersedes the older (the waiting ones never run);
// errors arrive typed; opening, analysing, the pictures' measures, the streamed density, watch series,
// verification and export, all on the real DeepSpeed fixtures.
#include <QTest>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "ckptdoc/error.h"
#include "ckptdoc/session/session.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/param_density.h"
#include "ckptdoc/sources/deepspeed/synthesize.h"
#include "damage_support.h"
#include "test_support.h"

using namespace ckptdoc;
using namespace ckptdoc::session;
namespace fs = std::filesystem;
using Context = JobQueue::Context;

namespace {

std::string fixture(const std::string& name) {
  return test::deepspeed_fixture(name) + "/checkpoint";
}

// The UI thread's part: poll until `done` or the time is up.
template <class Pred>
bool pump(Session& s, Pred done, int ms = 120000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    s.poll();
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

std::string kind_of(const Outcome<int>& o) {
  return o.ok() ? "ok" : std::string(error_kind_name(o.error->kind));
}

// A synthetic ZeRO-1/2 style group over `ranks` ranks and `params` params, as layout_zero12 would cut it.
deepspeed::GroupLayout big_group(int ranks, int params) {
  deepspeed::GroupLayout g;
  int64_t n = 0;
  for (int i = 0; i < params; ++i) {
    deepspeed::ParamEntry pe;
    pe.name = "p" + std::to_string(i);
    pe.numel = 100 + (i * 37) % 400;
    pe.shape = {pe.numel};
    pe.offset = n;
    n += pe.numel;
    g.params.push_back(pe);
  }
  g.numel = n;
  g.partition_numel = (n + ranks - 1) / ranks;
  g.padded_numel = g.partition_numel * ranks;
  int p = 0;
  int64_t used = 0;
  for (int r = 0; r < ranks; ++r) {
    deepspeed::RankPartition part;
    part.rank = r;
    int64_t off = 0;
    while (off < g.partition_numel && p < params) {
      const int64_t take = std::min(g.partition_numel - off, g.params[static_cast<size_t>(p)].numel - used);
      part.fragments.push_back({p, used, off, take});
      off += take;
      used += take;
      if (used == g.params[static_cast<size_t>(p)].numel) {
        ++p;
        used = 0;
      }
    }
    part.real_numel = off;
    part.padding = g.partition_numel - off;
    g.partitions.push_back(part);
  }
  return g;
}

// Red to orange: what a stale fragment (exact fraction) or a NaN (NaN/Inf count) is painted; never the green
// of a healthy one.
bool reddish(uint32_t rgba) {
  return (rgba >> 24) > 180 && ((rgba >> 16) & 0xFF) < 150 && (rgba & 0xFF) == 0xFF;
}

}  // namespace

class TestSession : public QObject {
  Q_OBJECT
 private slots:
  void laneRunsNewestAndSupersedesTheRest() {
    JobQueue q;
    std::mutex mu;
    std::vector<int> started;
    std::atomic<bool> release{false};
    std::vector<std::string> endings(20);
    std::vector<JobPtr> jobs;
    auto started_count = [&] {
      std::lock_guard<std::mutex> lock(mu);
      return started.size();
    };
    for (int i = 0; i < 20; ++i) {
      if (i == 1)  // the first one is running when the others arrive
        while (started_count() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      jobs.push_back(q.submit<int>(
          JobKind::Other, "lane", "job",
          [&, i](Context&) {
            {
              std::lock_guard<std::mutex> lock(mu);
              started.push_back(i);
            }
            while (i == 0 && !release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            return i;
          },
          [&endings, i](Outcome<int>& o) { endings[static_cast<size_t>(i)] = kind_of(o); }));
    }
    release = true;
    q.wait_idle();
    QCOMPARE(q.poll(), size_t{20});
    QCOMPARE(started, (std::vector<int>{0, 19}));     // the waiting ones never ran
    QCOMPARE(endings[0], std::string("superseded"));  // it ran, but its result is stale
    for (int i = 1; i < 19; ++i) QCOMPARE(endings[static_cast<size_t>(i)], std::string("superseded"));
    QCOMPARE(endings[19], std::string("ok"));
    QCOMPARE(jobs[0]->state(), JobState::Superseded);
    QCOMPARE(jobs[7]->state(), JobState::Superseded);
    QCOMPARE(jobs[19]->state(), JobState::Succeeded);
    QVERIFY(q.jobs().empty());
  }

  void resultsArriveOnlyInPollOnThePollingThread() {
    JobQueue q;
    std::atomic<int> wakes{0};
    q.set_wake([&] { ++wakes; });
    std::thread::id worker, deliverer;
    bool delivered = false;
    auto job = q.submit<int>(
        JobKind::Other, "", "answer",
        [&](Context&) {
          worker = std::this_thread::get_id();
          return 42;
        },
        [&](Outcome<int>& o) {
          deliverer = std::this_thread::get_id();
          delivered = o.ok() && *o.value == 42;
        });
    q.wait_idle();
    QVERIFY(!delivered);
    QVERIFY(wakes.load() >= 1);
    QVERIFY(!job->finished());  // ended, but not delivered yet
    QCOMPARE(q.jobs().size(), size_t{1});
    q.poll();
    QVERIFY(delivered);
    QCOMPARE(deliverer, std::this_thread::get_id());
    QVERIFY(worker != std::this_thread::get_id());
    QCOMPARE(job->state(), JobState::Succeeded);
  }

  void errorsArriveTyped() {
    JobQueue q;
    std::map<std::string, Outcome<int>> out;
    auto run = [&](const std::string& name, std::function<int(Context&)> work) {
      q.submit<int>(JobKind::Other, "", name, std::move(work),
                    [&out, name](Outcome<int>& o) { out[name] = o; });
    };
    run("input", [](Context&) -> int { throw Error("rank3.pt", "offset 12", "truncated"); });
    run("internal", [](Context&) -> int { throw std::logic_error("oops"); });
    run("system", [](Context&) -> int {
      throw std::filesystem::filesystem_error("cannot list", "/nope",
                                              std::make_error_code(std::errc::permission_denied));
    });
    q.wait_idle();
    q.poll();
    QCOMPARE(out.size(), size_t{3});
    QCOMPARE(out["input"].error->kind, session::ErrorKind::Input);
    QCOMPARE(out["input"].error->file, std::string("rank3.pt"));
    QCOMPARE(out["input"].error->where, std::string("offset 12"));
    QVERIFY(out["input"].error->message.find("truncated") != std::string::npos);
    QCOMPARE(out["input"].job->state(), JobState::Failed);
    QCOMPARE(out["internal"].error->kind, session::ErrorKind::Internal);
    QCOMPARE(out["system"].error->kind, session::ErrorKind::System);
    QCOMPARE(out["system"].error->file, std::string("/nope"));
  }

  // A cancelled job ends Cancelled, whether its work noticed or finished first; only a job that wrote files
  // keeps its result (the files exist).
  void cancelStopsCheckingWorkButNeverHidesWrittenFiles() {
    JobQueue q;
    std::atomic<bool> in{false}, finish_anyway{false};
    std::map<std::string, std::string> endings;
    auto looping = q.submit<int>(
        JobKind::Other, "", "loop",
        [&](Context& c) {
          in = true;
          for (;;) {
            c.check();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          return 0;
        },
        [&](Outcome<int>& o) { endings["loop"] = kind_of(o); });
    auto deaf = q.submit<int>(
        JobKind::Export, "", "deaf",
        [&](Context&) {
          while (!finish_anyway) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          return 7;  // it wrote its files before noticing: the result stands
        },
        [&](Outcome<int>& o) { endings["deaf"] = kind_of(o); });
    while (!in) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    looping->cancel();
    deaf->cancel();
    finish_anyway = true;
    q.wait_idle();
    q.poll();
    QCOMPARE(endings["loop"], std::string("cancelled"));
    QCOMPARE(looping->state(), JobState::Cancelled);
    QCOMPARE(endings["deaf"], std::string("ok"));
    QCOMPARE(deaf->state(), JobState::Succeeded);
    std::string late;
    auto quick = q.submit<int>(
        JobKind::Analyse, "", "quick", [](Context&) { return 1; },
        [&](Outcome<int>& o) { late = kind_of(o); });
    q.wait_idle();  // finished before the cancel: still cancelled, nothing was written
    quick->cancel();
    q.poll();
    QCOMPARE(late, std::string("cancelled"));
  }

  void postedUpdatesComeInOrderBeforeTheEnding() {
    JobQueue q;
    std::vector<std::string> seen;
    q.submit<int>(
        JobKind::Watch, "", "feed",
        [&](Context& c) {
          for (int i = 0; i < 3; ++i) c.post([&seen, i] { seen.push_back("update " + std::to_string(i)); });
          return 3;
        },
        [&](Outcome<int>& o) { seen.push_back("end " + kind_of(o)); });
    q.wait_idle();
    q.poll();
    QCOMPARE(seen, (std::vector<std::string>{"update 0", "update 1", "update 2", "end ok"}));
  }

  void opensAndAnalysesARealCheckpoint() {
    Session s;
    s.settings().device = DeviceKind::Cpu;
    std::vector<Event> events;
    s.listen([&](Event e, const JobPtr&, const JobError*) { events.push_back(e); });
    const auto job = s.open(fixture("zero2_fp16_ws2"));
    QVERIFY(job);
    QCOMPARE(job->kind(), JobKind::Open);
    QVERIFY(!s.is_open());  // nothing changes before a poll delivers it
    QVERIFY(pump(s, [&] { return s.report() && !s.analysing(); }));
    QCOMPARE(events, (std::vector<Event>{Event::Opening, Event::Opened, Event::AnalysisStarted,
                                         Event::AnalysisFinished}));
    QCOMPARE(s.report()->params.size(), size_t{8});
    for (const auto& f : s.findings()) QVERIFY2(f.severity != analysis::Severity::Error, f.code.c_str());
    const auto& order = s.params_by_severity();
    QCOMPARE(order.size(), size_t{8});
    for (size_t i = 1; i < order.size(); ++i)
      QVERIFY(s.report()->params[static_cast<size_t>(order[i - 1])].severity_score() >=
              s.report()->params[static_cast<size_t>(order[i])].severity_score());
    QCOMPARE(s.worst_param(), s.report()->params[static_cast<size_t>(order[0])].name);
    const auto ref = s.find_param("fc1.weight");
    QVERIFY(ref);
    QVERIFY(ref->report_index >= 0);
    QCOMPARE(s.param_report("fc1.weight")->name, std::string("fc1.weight"));
    QVERIFY(s.health());
    QCOMPARE(s.per_rank_divergence().size(), size_t{2});
    // A healthy checkpoint: every strip column is an exact param, green.
    const auto strip = s.param_strip(StripLane::Divergence, 64);
    for (const auto& c : strip) {
      QVERIFY(c.param >= 0);
      QCOMPARE(c.rgba, shade_rgba(Shade::ExactFraction, 0, false));
    }
  }

  // A param's tooltip (the strip's and the layout map's) spells its shape as every other view and command
  // does: fc1.weight is the [301, 96] DeepSpeed's zero_to_fp32.py wrote (the fixture's tensors.json); the
  // tooltips used to say [301x96].
  void tooltipsSpellShapesAsEverywhere() {
    Session s;
    s.settings().device = DeviceKind::Cpu;
    s.open(fixture("zero2_fp16_ws2"));
    QVERIFY(pump(s, [&] { return s.report() && !s.analysing(); }));
    const auto ref = s.find_param("fc1.weight");
    QVERIFY(ref);
    const std::string tip = s.describe_param(ref->group, ref->param);
    QVERIFY2(tip.rfind("fc1.weight [301, 96]\n", 0) == 0, tip.c_str());
  }

  void aFailedOpenKeepsTheCurrentSource() {
    Session s;
    s.settings().device = DeviceKind::Cpu;
    s.open(fixture("zero1_fp16_ws2"));
    QVERIFY(pump(s, [&] { return s.report() && !s.analysing(); }));
    test::TempDir dir;
    test::write_text(dir.file("garbage.pt"), "not a checkpoint");
    std::optional<JobError> err;
    s.open(dir.file("garbage.pt"), {}, [&](Outcome<std::shared_ptr<const deepspeed::Checkpoint>>& o) {
      if (!o.ok()) err = o.error;
    });
    QVERIFY(pump(s, [&] { return err.has_value(); }));
    QCOMPARE(err->kind, session::ErrorKind::Input);
    QVERIFY(!err->message.empty());
    QVERIFY(s.is_open());
    QCOMPARE(s.path(), fixture("zero1_fp16_ws2"));
    QVERIFY(s.report());
  }

  // Opening B right after A: A's analysis is never reported once B is open. Whether A opens at all first
  // depends on the threads (A's open may end before B's is asked, and A's analysis may end before B opens),
  // so the test asserts what holds either way: every analysis reported belongs to the source open when it
  // is reported, and B's is the last.
  void aNewSourceSupersedesTheOldOnesAnalysis() {
    Session s;
    s.settings().device = DeviceKind::Cpu;
    std::map<uint64_t, std::string> analysing;  // analysis job -> the source open when it started
    std::vector<std::string> opened, stale;
    std::vector<uint64_t> finished;
    s.listen([&](Event e, const JobPtr& j, const JobError*) {
      if (e == Event::Opened) opened.push_back(s.path());
      if (e == Event::AnalysisStarted) analysing[j->id()] = s.path();
      if (e != Event::AnalysisFinished) return;
      finished.push_back(j->id());
      if (analysing[j->id()] != s.path()) stale.push_back(analysing[j->id()] + " reported while " + s.path());
    });
    s.open(fixture("zero3_fp16_ws2"));
    s.open(fixture("zero2_bf16_ws2"));
    QVERIFY(pump(s, [&] { return s.report() && !s.analysing() && s.jobs().empty(); }));
    QCOMPARE(s.path(), fixture("zero2_bf16_ws2"));
    QCOMPARE(s.catalog()->lp_dtype, DType::BF16);
    QVERIFY2(stale.empty(), stale.empty() ? "" : stale.front().c_str());
    QCOMPARE(opened.back(), fixture("zero2_bf16_ws2"));
    QVERIFY(!finished.empty() && finished.size() <= opened.size());
    QCOMPARE(finished.back(), s.analysis_job()->id());
  }

  // B opened while A's analysis still runs (A big, one analysis thread; B a small fixture whose open ends
  // first): A's result, arriving after B is open, is dropped, never reported as B's.
  void aLateAnalysisOfTheOldSourceIsDropped() {
    test::TempDir dir;
    deepspeed::SynthOptions big;
    big.target_params = 10'000'000;
    deepspeed::write_synthetic_checkpoint(dir.file("big"), big);
    Session s;
    s.settings().device = DeviceKind::Cpu;
    s.settings().threads = 1;
    std::map<uint64_t, std::string> analysing;  // analysis job -> the source open when it started
    std::vector<std::string> stale;
    s.listen([&](Event e, const JobPtr& j, const JobError*) {
      if (e == Event::AnalysisStarted) analysing[j->id()] = s.path();
      if (e == Event::AnalysisFinished && analysing[j->id()] != s.path())
        stale.push_back(analysing[j->id()] + " reported while " + s.path());
    });
    s.open(dir.file("big"));
    QVERIFY(pump(s, [&] { return s.is_open() && s.analysing(); }));
    const JobPtr first = s.analysis_job();
    s.open(fixture("zero2_bf16_ws2"));
    QVERIFY(pump(s, [&] { return s.report() && !s.analysing() && s.jobs().empty(); }));
    QCOMPARE(s.path(), fixture("zero2_bf16_ws2"));
    QCOMPARE(s.catalog()->lp_dtype, DType::BF16);
    QVERIFY2(stale.empty(), stale.empty() ? "" : stale.front().c_str());
    QVERIFY(s.analysis_job() != first);
  }

  // 16-bit weights picked for a ZeRO-3 checkpoint (the app's --lp-source) are compared on its analyses, and
  // are forgotten when another source opens: a ZeRO-2 checkpoint opened next analyses as itself instead of
  // failing on an lp source that only ZeRO-3 takes.
  void lpSourceAppliesToItsCheckpointOnly() {
    Session s;
    s.settings().device = DeviceKind::Cpu;
    s.open(fixture("zero3_fp16_ws2"));
    QVERIFY(pump(s, [&] { return s.report() && !s.analysing(); }));
    s.set_lp_source(test::deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint.zero_to_fp32.bin");
    s.analyse();
    QVERIFY(pump(s, [&] { return (s.report() || s.analysis_error()) && !s.analysing(); }));
    QVERIFY2(s.report(), s.analysis_error() ? s.analysis_error()->message.c_str() : "");
    const auto has = [&](const char* code) {
      return std::any_of(s.findings().begin(), s.findings().end(),
                         [&](const auto& f) { return f.code == code; });
    };
    QVERIFY(has("lp-source-compared") || has("lp-source-mismatch"));
    s.open(fixture("zero2_fp16_ws2"));
    QVERIFY(
        pump(s, [&] { return (s.report() || s.analysis_error()) && !s.analysing() && s.jobs().empty(); }));
    QVERIFY(!s.lp_source());
    QVERIFY2(s.report(), s.analysis_error() ? s.analysis_error()->message.c_str() : "");
  }

  // The density streamed through the map in small chunks counts exactly what density_2d of the assembled
  // param counts, for every param of every layout; ZeRO-3 placeholders have no weight to pair.
  void streamedDensityEqualsTheAssembledOne() {
    for (const char* name : {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "bf16opt_zero1_ws2"}) {
      const auto ckpt = deepspeed::Checkpoint::open(fixture(name));
      const auto& cat = ckpt->catalog();
      for (size_t g = 0; g < cat.groups.size(); ++g)
        for (size_t p = 0; p < cat.groups[g].params.size(); ++p) {
          const auto streamed =
              deepspeed::param_density(*ckpt, static_cast<int>(g), static_cast<int>(p), 40, nullptr, 777);
          const auto data = ckpt->assemble(static_cast<int>(g), static_cast<int>(p), false);
          const auto whole = analysis::density_2d(data.lp->to_float(), data.fp32, 40);
          QVERIFY2(streamed.pairs > 0, name);
          QCOMPARE(streamed.pairs, whole.pairs);
          QCOMPARE(streamed.nonfinite, whole.nonfinite);
          QCOMPARE(streamed.lo, whole.lo);
          QCOMPARE(streamed.hi, whole.hi);
          QVERIFY(streamed.counts == whole.counts);
          QCOMPARE(streamed.max_count, whole.max_count);
        }
    }
    const auto z3 = deepspeed::Checkpoint::open(fixture("zero3_fp16_ws2"));
    QCOMPARE(deepspeed::param_density(*z3, 0, 0, 40).pairs, uint64_t{0});
    QVERIFY_THROWS_EXCEPTION(Error, deepspeed::param_density(*z3, 0, 9999, 40));
  }

  void densityJobOfTheSelectedParam() {
    Session s;
    s.settings().analyse_on_open = false;
    s.open(fixture("zero2_fp16_ws2"));
    QVERIFY(pump(s, [&] { return s.is_open(); }));
    std::optional<Outcome<analysis::Density2D>> got, bad;
    s.density("fc1.weight", 32, [&](Outcome<analysis::Density2D>& o) { got = o; });
    QVERIFY(pump(s, [&] { return got.has_value(); }));
    QVERIFY(got->ok());
    QCOMPARE(got->value->bins, 32);
    QVERIFY(got->value->pairs > 0);
    s.density("no.such.param", 32, [&](Outcome<analysis::Density2D>& o) { bad = o; });
    QVERIFY(pump(s, [&] { return bad.has_value(); }));
    QCOMPARE(bad->error->kind, session::ErrorKind::Input);
  }

  // One rank of a real checkpoint gets random masters: its fragments measure stale, the other rank's exact,
  // and the layout raster paints them apart.
  void healthMapAndRasterShowTheStaleRank() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    test::copy_tree(fixture("zero2_fp16_ws2"), ckpt);
    test::replace_fp32_masters_with_noise(test::optim_file_of(ckpt + "/global_step5", 1), 3);
    Session s;
    s.settings().device = DeviceKind::Cpu;
    s.open(ckpt);
    QVERIFY(pump(s, [&] { return s.report() && !s.analysing(); }));
    const auto& g = s.catalog()->groups[0];
    for (size_t r = 0; r < 2; ++r)
      for (size_t f = 0; f < g.partitions[r].fragments.size(); ++f) {
        const Measures* m = s.health()->fragment(0, static_cast<int>(r), f);
        QVERIFY(m);
        const float level = s.health()->level(Shade::ExactFraction, *m);
        if (r == 1)
          QVERIFY2(level > 0.9f, qPrintable(QString::number(level)));
        else
          QCOMPARE(level, 0.0f);
      }
    LayoutRasterRequest rq;
    rq.group = 0;
    rq.shade = Shade::ExactFraction;
    rq.width = 600;
    rq.height = 120;
    rq.geometry.rank_count = 2;
    rq.geometry.partition_numel = g.partition_numel;
    rq.geometry.fit(600);
    rq.geometry.fit_rows(120);
    const Raster img = s.layout_raster(rq);
    const int y0 = static_cast<int>(rq.geometry.row_top(0) + rq.geometry.row_height / 2);
    const int y1 = static_cast<int>(rq.geometry.row_top(1) + rq.geometry.row_height / 2);
    const int x = static_cast<int>(rq.geometry.x_of(static_cast<double>(g.partition_numel) / 3));
    QCOMPARE(img.pixel(x, y0), shade_rgba(Shade::ExactFraction, 0, false));
    QVERIFY(reddish(img.pixel(x, y1)));
  }

  // The synthetic break the pictures' benchmarks and screenshots use: one stale rank (dp / 2) among many.
  void synthStaleOneRankNamesThatRank() {
    test::TempDir dir;
    deepspeed::SynthOptions o;
    o.dp = 8;
    o.layers = 2;
    o.hidden = 32;
    o.breakage = deepspeed::parse_synth_break("stale-fp32-one-rank");
    QCOMPARE(o.breakage, deepspeed::SynthBreak::StaleFp32OneRank);
    deepspeed::write_synthetic_checkpoint(dir.file("ckpt"), o);
    Session s;
    s.settings().device = DeviceKind::Cpu;
    s.open(dir.file("ckpt"));
    QVERIFY(pump(s, [&] { return s.report() && !s.analysing(); }));
    bool named = false;
    for (const auto& f : s.findings())
      if (f.code == "fp32-master-mismatch") named = f.ranks == std::vector<int>{4};
    QVERIFY(named);
    for (const auto& [rank, d] : s.per_rank_divergence())
      QVERIFY2((rank == 4) == (d.exact_fraction() < 0.99), qPrintable(QString::number(rank)));
  }

  // 1024 ranks in 300 pixels: several ranks share a pixel row, and the one stale rank still shows.
  void thinRowsKeepTheOneBadRankVisible() {
    deepspeed::Catalog cat;
    cat.groups.push_back(big_group(1024, 2000));
    const auto& g = cat.groups[0];
    analysis::Report report;
    const int bad_rank = 517, nan_rank = 900;
    for (size_t p = 0; p < g.params.size(); ++p) {
      analysis::ParamReport pr;
      pr.name = g.params[p].name;
      report.params.push_back(pr);
    }
    for (const auto& part : g.partitions)
      for (const auto& f : part.fragments) {
        DivergenceStats d;
        d.count = static_cast<uint64_t>(f.numel);
        d.exact = part.rank == bad_rank ? 0 : d.count;
        auto& pr = report.params[static_cast<size_t>(f.param)];
        pr.per_rank[part.rank] = d;
        if (part.rank == nan_rank) pr.nonfinite_by_rank["fp32"][part.rank] = 1;
      }
    const auto health = HealthMap::build(cat, report);
    for (auto [shade, rank] :
         {std::pair{Shade::ExactFraction, bad_rank}, std::pair{Shade::NonFinite, nan_rank}}) {
      LayoutRasterRequest rq;
      rq.shade = shade;
      rq.width = 800;
      rq.height = 300;
      rq.geometry.rank_count = 1024;
      rq.geometry.partition_numel = g.partition_numel;
      rq.geometry.fit(800);
      rq.geometry.fit_rows(300);
      QVERIFY(rq.geometry.pitch() < 1.0);
      const Raster img = layout_raster(g, health.get(), rq);
      const int bad_y = static_cast<int>(std::floor(rq.geometry.row_top(rank)));
      int red_in_bad_row = 0, red_elsewhere = 0;
      for (int y = static_cast<int>(rq.geometry.header_height); y < img.height; ++y)
        for (int x = static_cast<int>(rq.geometry.label_width); x < img.width; ++x)
          if (reddish(img.pixel(x, y))) (y == bad_y || y == bad_y + 1 ? red_in_bad_row : red_elsewhere)++;
      QVERIFY2(red_in_bad_row > 100,
               qPrintable(QString("%1 red pixels in row %2").arg(red_in_bad_row).arg(bad_y)));
      QCOMPARE(red_elsewhere, 0);
    }
  }

  void watchAppendsOnePointPerSnapshot() {
    Session s;
    s.settings().device = DeviceKind::Cpu;
    int samples = 0;
    s.listen([&](Event e, const JobPtr&, const JobError*) { samples += e == Event::WatchSample; });
    std::optional<Outcome<size_t>> end;
    std::vector<Snapshot> snaps(2);
    snaps[0].path = fixture("zero1_fp16_ws2");
    snaps[1].path = fixture("zero2_fp16_ws2");
    snaps[1].step = 7;
    s.watch(list_feed(snaps), [&](Outcome<size_t>& o) { end = o; });
    QVERIFY(pump(s, [&] { return end.has_value(); }));
    QVERIFY(end->ok());
    QCOMPARE(*end->value, size_t{2});
    QCOMPARE(samples, 2);
    const TimeSeries* errors = s.series().find("errors");
    QVERIFY(errors);
    QCOMPARE(errors->points.size(), size_t{2});
    QCOMPARE(errors->points[0].step, int64_t{5});  // the fixture's global_steps
    QCOMPARE(errors->points[1].step, int64_t{7});
    QCOMPARE(errors->points[0].value, 0.0);
    QVERIFY(s.series().find("min_exact_fraction"));
    QCOMPARE(s.samples().size(), size_t{2});
    QVERIFY(!s.samples()[0].report);  // only the newest report is kept
    QVERIFY(s.samples()[1].report);
  }

  // Attach mode's core: a folder feed followed with `follow` shows each committed snapshot as the open source
  // with its analysis, reports an unreadable one and goes on, and notes a snapshot going away.
  void followAFolderOfSnapshots() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    fs::create_directories(run);
    auto make = [&](const std::string& name, const std::vector<std::string>& args) {
      QVERIFY2(test::make_snapshot(run + "/" + name, args), "make_snapshot.py failed");
    };
    make("step5", {"--step", "5"});
    fs::create_directories(run + "/bad");  // committed (its manifest is there) but unreadable
    test::write_text(run + "/bad/manifest.json", R"({"format": "ckptdoc-snapshot",)");
    Session s;
    s.settings().device = DeviceKind::Cpu;
    std::vector<Event> events;
    std::vector<JobError> notes;
    s.listen([&](Event e, const JobPtr&, const JobError* err) {
      events.push_back(e);
      if (err && (e == Event::WatchSkipped || e == Event::WatchRemoved)) notes.push_back(*err);
    });
    std::optional<Outcome<size_t>> end;
    auto job = s.watch(
        folder_feed(run), [&](Outcome<size_t>& o) { end = o; }, true);
    auto seen = [&](Event e) { return std::count(events.begin(), events.end(), e); };
    QVERIFY(pump(s, [&] { return seen(Event::WatchSample) >= 1 && seen(Event::WatchSkipped) >= 1; }));
    QVERIFY(s.is_open());
    QCOMPARE(fs::path(s.path()).filename().string(), std::string("step5"));
    QVERIFY(s.report());
    QVERIFY(!s.analysing());
    QCOMPARE(s.samples().size(), size_t{1});
    QCOMPARE(s.samples()[0].step, int64_t{5});
    QCOMPARE(s.samples()[0].summary.global_steps, int64_t{5});
    QVERIFY(!s.samples()[0].summary.params.empty());
    // shown as opened then analysed, before the sample's own event
    const auto opened = std::find(events.begin(), events.end(), Event::Opened);
    const auto analysed = std::find(events.begin(), events.end(), Event::AnalysisFinished);
    const auto sample = std::find(events.begin(), events.end(), Event::WatchSample);
    QVERIFY(opened < analysed && analysed < sample);
    QCOMPARE(notes.size(), size_t{1});
    QVERIFY2(notes[0].file.find("/run/bad") != std::string::npos, notes[0].file.c_str());  // names the file
    QVERIFY(!end.has_value());  // the watch goes on

    fs::remove_all(run + "/step5");
    QVERIFY(pump(s, [&] { return seen(Event::WatchRemoved) >= 1; }));
    QCOMPARE(fs::path(notes.back().file).filename().string(), std::string("step5"));
    QVERIFY(s.samples()[0].removed);
    QVERIFY(s.is_open() && s.report());  // what was read stays

    job->cancel();
    QVERIFY(pump(s, [&] { return end.has_value(); }));
    QCOMPARE(end->error->kind, session::ErrorKind::Cancelled);
  }

  // A re-dumped tag (its rank files and then its manifest replaced in the same folder, with a new id) is the
  // same snapshot: its new sample replaces the old one, in samples() and in the series.
  void followReplacesARedumpedSnapshot() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    fs::create_directories(run);
    auto make = [&](const std::string& name, const std::vector<std::string>& args) {
      QVERIFY2(test::make_snapshot(run + "/" + name, args), "make_snapshot.py failed");
    };
    make("step5", {"--step", "5"});
    Session s;
    s.settings().device = DeviceKind::Cpu;
    int samples = 0;
    s.listen([&](Event e, const JobPtr&, const JobError*) { samples += e == Event::WatchSample; });
    std::optional<Outcome<size_t>> end;
    auto job = s.watch(
        folder_feed(run), [&](Outcome<size_t>& o) { end = o; }, true);
    QVERIFY(pump(s, [&] { return samples >= 1; }));
    QCOMPARE(s.samples().size(), size_t{1});
    const std::string first_id = s.samples()[0].summary.id;

    make("step5", {"--step", "5", "--live", R"({"grad_norm": 2.5})"});
    QVERIFY(pump(s, [&] { return samples >= 2; }));
    QCOMPARE(s.samples().size(), size_t{1});
    const auto& w = s.samples()[0];
    QVERIFY(w.summary.id != first_id);
    QVERIFY(w.summary.grad_norm.has_value());
    QCOMPARE(*w.summary.grad_norm, 2.5);
    QVERIFY(!w.removed);
    QVERIFY(w.report);  // the newest report is kept
    QCOMPARE(s.series().find("errors")->points.size(), size_t{1});
    QCOMPARE(fs::path(s.path()).filename().string(), std::string("step5"));

    job->cancel();
    QVERIFY(pump(s, [&] { return end.has_value(); }));
  }

  // Attaching to a folder that already holds several snapshots delivers them together: one WatchSample, and
  // the newest shown once (one Opened, one AnalysisFinished), not one round per snapshot.
  void followDeliversTheSnapshotsAlreadyThereAtOnce() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    fs::create_directories(run);
    for (const char* step : {"5", "9", "12"}) {
      const auto r = test::run_python(test::script("fixtures/make_snapshot.py"),
                                      {test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint/global_step5",
                                       run + "/step" + step, "--step", step});
      QVERIFY2(r.exit_code == 0, r.err.c_str());
    }
    Session s;
    s.settings().device = DeviceKind::Cpu;
    std::vector<Event> events;
    s.listen([&](Event e, const JobPtr&, const JobError*) { events.push_back(e); });
    std::optional<Outcome<size_t>> end;
    auto job = s.watch(
        folder_feed(run), [&](Outcome<size_t>& o) { end = o; }, true);
    QVERIFY(pump(s, [&] { return s.samples().size() >= 3; }));
    auto seen = [&](Event e) { return std::count(events.begin(), events.end(), e); };
    QCOMPARE(seen(Event::WatchSample), 1);
    QCOMPARE(seen(Event::Opened), 1);
    QCOMPARE(seen(Event::AnalysisFinished), 1);
    QCOMPARE(s.samples().size(), size_t{3});
    QCOMPARE(s.samples()[0].step, int64_t{5});
    QCOMPARE(s.samples()[2].step, int64_t{12});
    QVERIFY(!s.samples()[0].report && s.samples()[2].report);  // only the newest report is kept
    QCOMPARE(fs::path(s.path()).filename().string(), std::string("step12"));  // the newest is shown
    QCOMPARE(s.series().find("errors")->points.size(), size_t{3});

    job->cancel();
    QVERIFY(pump(s, [&] { return end.has_value(); }));
  }

  void planVerifyAndExportJobs() {
    Session s;
    s.settings().device = DeviceKind::Cpu;
    s.settings().analyse_on_open = false;
    s.open(fixture("zero2_fp16_ws2"));
    QVERIFY(pump(s, [&] { return s.is_open(); }));
    test::TempDir dir;
    std::optional<Outcome<repair::Plan>> refused, plan;
    s.plan_repair(dir.file("out"), repair::RepairRequest{}, [&](Outcome<repair::Plan>& o) { refused = o; });
    QVERIFY(pump(s, [&] { return refused.has_value(); }));
    QCOMPARE(refused->error->kind, session::ErrorKind::Input);
    QVERIFY(refused->error->message.find("no repair asked for") != std::string::npos);
    auto rq =
        Session::repair_request_for(analysis::RepairKind::ResetOptimizer, *s.catalog(), DeviceKind::Cpu);
    QVERIFY(rq.reset_optimizer);
    s.plan_repair(dir.file("out"), rq, [&](Outcome<repair::Plan>& o) { plan = o; });
    QVERIFY(pump(s, [&] { return plan.has_value(); }));
    QVERIFY(plan->ok());
    QVERIFY(!plan->value->files.empty());
    QVERIFY(!std::filesystem::exists(dir.file("out")));  // a plan writes nothing

    std::optional<Outcome<Verification>> verified;
    s.verify(fixture("zero1_fp16_ws2"), [&](Outcome<Verification>& o) { verified = o; });
    std::optional<Outcome<deepspeed::ExportResult>> exported;
    deepspeed::ExportOptions eo;
    eo.device = DeviceKind::Cpu;
    s.export_weights(dir.file("w.safetensors"), eo,
                     [&](Outcome<deepspeed::ExportResult>& o) { exported = o; });
    QVERIFY(pump(s, [&] { return verified && exported; }));
    QVERIFY(verified->ok());
    QVERIFY(verified->value->clean());
    QVERIFY(exported->ok());
    QVERIFY(exported->value->tensors > 0);
    QVERIFY(std::filesystem::file_size(dir.file("w.safetensors")) > 0);
    QCOMPARE(
        Session::default_export_path(*s.catalog(), deepspeed::ExportFormat::Torch),
        (std::filesystem::path(fixture("zero2_fp16_ws2")).parent_path() / "checkpoint-weights.bin").string());
  }
};

CKPTDOC_TEST_MAIN(TestSession)
#include "test_session.moc"
