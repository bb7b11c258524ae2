// Live-engine snapshots read as checkpoints: snapshots built (by tests/fixtures/make_snapshot.py, h5py) from
// the committed real DeepSpeed checkpoints give the same catalog and diagnosis as the checkpoint, with
// tensors mapped from the HDF5 files; half-written and damaged snapshots are refused or named; the live
// findings come from real gradients and numbers; convert writes the checkpoint back bit for bit; the timeline
// and the watcher behave.
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "cancel_at_dir_sync_io.h"
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "ckptdoc/sources/snapshot/convert.h"
#include "ckptdoc/sources/snapshot/timeline.h"
#include "ckptdoc/sources/snapshot/watcher.h"
#include "ckptdoc/task/progress.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

const char* kFixtures[] = {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2",
                           "bf16opt_zero1_ws2"};

std::string tag_dir(const std::string& fixture) {
  return test::deepspeed_fixture(fixture) + "/checkpoint/global_step5";
}

// make_snapshot.py FIXTURE OUT args...; returns its stdout.
std::string make_snapshot(const std::string& fixture, const std::string& out,
                          std::vector<std::string> args = {}) {
  args.insert(args.begin(), {tag_dir(fixture), out});
  const auto r = test::run_python(test::script("fixtures/make_snapshot.py"), args);
  if (r.exit_code != 0) throw std::runtime_error("make_snapshot.py failed: " + r.err);
  return r.out;
}

analysis::Report diagnose_on_cpu(const deepspeed::Checkpoint& ck) {
  analysis::DiagnoseOptions o;
  o.device = DeviceKind::Cpu;
  return deepspeed::diagnose(ck, o);
}

std::vector<std::string> codes(const analysis::Report& r) {
  std::vector<std::string> out;
  for (const auto& f : r.findings) out.push_back(f.code);
  return out;
}

const analysis::Finding* find(const analysis::Report& r, const std::string& code) {
  for (const auto& f : r.findings)
    if (f.code == code) return &f;
  return nullptr;
}

const deepspeed::Problem* problem(const deepspeed::Catalog& c, const std::string& code) {
  for (const auto& p : c.problems)
    if (p.code == code) return &p;
  return nullptr;
}

std::string all_problems(const deepspeed::Catalog& c) {
  std::string s;
  for (const auto& p : c.problems) s += p.code + ": " + p.message + "\n";
  return s;
}

bool same_stats(const std::optional<ValueStats>& a, const std::optional<ValueStats>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->count == b->count && a->sum == b->sum && a->sum_sq == b->sum_sq && a->nan == b->nan &&
                a->min == b->min && a->max == b->max);
}

void write_file(const std::string& path, const std::string& text) {
  test::write_text(path, text);
}

// A snapshot one row of a data-driven test reads, and make_snapshot.py's inputs for it.
struct RowSnapshot {
  std::string key;  // the row's data tag (with a suffix when the row reads several)
  std::string fixture;
  std::string name;  // its folder's name (the snapshot's tag)
  std::vector<std::string> args;
};

std::vector<RowSnapshot> reads_rows() {
  std::vector<RowSnapshot> rows;
  for (const char* f : kFixtures) rows.push_back({f, f, "step5", {}});
  rows.push_back({"zero2_fp16_ws2 chunked+gzip", "zero2_fp16_ws2", "step5", {"--chunked"}});
  rows.push_back({"zero3_fp16_ws2 chunked+gzip", "zero3_fp16_ws2", "step5", {"--chunked"}});
  return rows;
}

struct DamageRow {
  const char *damage, *says;
};
const DamageRow kDamageRows[] = {{"storage-dtype", "expected elements of float32, found float64"},
                                 {"missing-storage", "no dataset of that name"},
                                 {"truncate-rank1", "rank_00001.h5"},
                                 {"rank-mismatch", "manifest lists it as rank 1"}};

struct LiveRow {
  const char *tag, *live, *code;
  analysis::Severity severity;
};
const LiveRow kLiveRows[] = {
    {"norm 50x clip", R"({"grad_norm": 50.0})", "gradient-norm-far-above-clip", analysis::Severity::Warning},
    {"norm 0", R"({"grad_norm": 0.0})", "gradient-norm-zero", analysis::Severity::Warning},
    {"scale at floor", R"({"loss_scale": 1.0, "min_loss_scale": 1.0})", "loss-scale-at-floor",
     analysis::Severity::Warning},
    {"overflow", R"({"overflow": true, "skipped_steps": 2})", "last-step-overflow",
     analysis::Severity::Info}};

}  // namespace

class TestSnapshot : public QObject {
  Q_OBJECT
  std::vector<std::unique_ptr<test::TempDir>> row_dirs_;
  std::map<std::string, std::string> row_snapshots_;  // "function/key" -> folder

  // The snapshot `key` of the running row. All rows' snapshots of the running function are made by one
  // make_snapshot.py run (its --then) when its first row asks (a torch start is seconds), each in its own
  // folder.
  std::string row_snapshot(const std::vector<RowSnapshot>& all, const std::string& key) {
    const std::string fn = QTest::currentTestFunction();
    if (!row_snapshots_.count(fn + "/" + all.front().key)) {
      const auto& dir = *row_dirs_.emplace_back(std::make_unique<test::TempDir>());
      std::vector<std::string> args;
      for (size_t i = 0; i < all.size(); ++i) {
        const std::string out = dir.file(std::to_string(i) + "/" + all[i].name);
        if (!args.empty()) args.push_back("--then");
        args.insert(args.end(), {tag_dir(all[i].fixture), out});
        args.insert(args.end(), all[i].args.begin(), all[i].args.end());
        row_snapshots_[fn + "/" + all[i].key] = out;
      }
      const auto r = test::run_python(test::script("fixtures/make_snapshot.py"), args);
      if (r.exit_code != 0) throw std::runtime_error("make_snapshot.py failed: " + r.err);
    }
    return row_snapshots_.at(fn + "/" + key);
  }

 private slots:
  void readsAsItsCheckpoint_data() {
    QTest::addColumn<QString>("fixture");
    QTest::addColumn<bool>("chunked");
    for (const auto& r : reads_rows())
      QTest::newRow(r.key.c_str()) << QString::fromStdString(r.fixture) << !r.args.empty();
  }
  void readsAsItsCheckpoint() {
    QFETCH(QString, fixture);
    QFETCH(bool, chunked);
    const std::string snap = row_snapshot(reads_rows(), QTest::currentDataTag());
    const auto ck = deepspeed::Checkpoint::open(tag_dir(fixture.toStdString()));
    const auto sn = deepspeed::Checkpoint::open(snap);
    QVERIFY(sn->snapshot() != nullptr);
    QVERIFY(ck->snapshot() == nullptr);
    const auto& a = ck->catalog();
    const auto& b = sn->catalog();
    QVERIFY2(b.problems.empty(), all_problems(b).c_str());
    QCOMPARE(b.tag, std::string("step5"));
    QCOMPARE(b.zero_stage, a.zero_stage);
    QCOMPARE(b.wrapper, a.wrapper);
    QCOMPARE(b.lp_dtype, a.lp_dtype);
    QCOMPARE(b.dp_world_size, a.dp_world_size);
    QCOMPARE(b.optimizer_step, a.optimizer_step);
    QCOMPARE(b.global_steps, a.global_steps);
    QCOMPARE(b.module_keys, a.module_keys);
    QCOMPARE(b.files.size(), a.files.size());
    for (size_t i = 0; i < a.files.size(); ++i) {
      QCOMPARE(b.files[i].path, a.files[i].path);
      QCOMPARE(b.files[i].role, a.files[i].role);
      QCOMPARE(b.files[i].dp_rank, a.files[i].dp_rank);
    }
    QCOMPARE(b.groups.size(), a.groups.size());
    for (size_t g = 0; g < a.groups.size(); ++g) {
      QCOMPARE(b.groups[g].partition_numel, a.groups[g].partition_numel);
      QCOMPARE(b.groups[g].params.size(), a.groups[g].params.size());
      for (size_t p = 0; p < a.groups[g].params.size(); ++p) {
        QCOMPARE(b.groups[g].params[p].name, a.groups[g].params[p].name);
        QCOMPARE(b.groups[g].params[p].offset, a.groups[g].params[p].offset);
      }
    }
    // Tensors come straight from the HDF5 rank files' memory maps (chunked ones from memory).
    const auto part = sn->fp32_partition(0, 1);
    QVERIFY(part.has_value());
    if (chunked) {
      QVERIFY(part->storage->owned != nullptr);
    } else {
      QVERIFY(part->storage->file != nullptr);
      QVERIFY(part->storage->file->path().ends_with("/rank_00001.h5"));
      QCOMPARE(part->storage->file_offset % 64, uint64_t(0));
    }
    // The same diagnosis, number for number.
    const auto ra = diagnose_on_cpu(*ck), rb = diagnose_on_cpu(*sn);
    std::vector<std::string> live_free;
    for (const auto& c : codes(rb))
      if (c != "gradients-not-recorded") live_free.push_back(c);
    QCOMPARE(live_free, codes(ra));
    QCOMPARE(rb.params.size(), ra.params.size());
    for (size_t i = 0; i < ra.params.size(); ++i) {
      const auto& x = ra.params[i];
      const auto& y = rb.params[i];
      QCOMPARE(y.name, x.name);
      QCOMPARE(y.lp_vs_fp32.has_value(), x.lp_vs_fp32.has_value());
      if (x.lp_vs_fp32) {
        QCOMPARE(y.lp_vs_fp32->exact, x.lp_vs_fp32->exact);
        QCOMPARE(y.lp_vs_fp32->max_abs, x.lp_vs_fp32->max_abs);
        QCOMPARE(y.lp_vs_fp32->sum_sq_diff, x.lp_vs_fp32->sum_sq_diff);
      }
      QVERIFY(same_stats(y.fp32, x.fp32));
      QVERIFY(same_stats(y.exp_avg, x.exp_avg));
      QVERIFY(same_stats(y.exp_avg_sq, x.exp_avg_sq));
      QVERIFY(same_stats(y.lp, x.lp));
    }
    QVERIFY(rb.live.has_value());
    QVERIFY(!ra.live.has_value());
    QCOMPARE(rb.live->global_steps, int64_t(5));
  }

  // A folder of snapshots opens its newest one, or the one --tag names.
  void folderOfSnapshotsOpensTheNewest() {
    test::TempDir dir;
    make_snapshot("zero2_fp16_ws2", dir.file("a"), {"--step", "10"});
    make_snapshot("zero2_fp16_ws2", dir.file("b"), {"--step", "20"});
    make_snapshot("zero2_fp16_ws2", dir.file("c"), {"--step", "15"});
    QCOMPARE(deepspeed::Checkpoint::open(dir.path())->catalog().tag, std::string("b"));
    deepspeed::OpenOptions o;
    o.tag = "c";
    QCOMPARE(deepspeed::Checkpoint::open(dir.path(), o)->catalog().tag, std::string("c"));
    QCOMPARE(snapshot::list_snapshots(dir.path()).size(), size_t(3));
    // A DeepSpeed save folder that also holds snapshots stays the checkpoint its `latest` names.
    test::TempDir both;
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", both.file("save"));
    make_snapshot("zero2_fp16_ws2", both.file("save/step9"), {"--step", "9"});
    const auto ck = deepspeed::Checkpoint::open(both.file("save"));
    QVERIFY(ck->snapshot() == nullptr);
    QCOMPARE(ck->catalog().tag, std::string("global_step5"));
    QVERIFY(deepspeed::Checkpoint::open(both.file("save/step9"))->snapshot() != nullptr);
  }

  void halfWrittenSnapshotIsRefused() {
    test::TempDir dir;
    make_snapshot("zero2_fp16_ws2", dir.file("s"), {"--damage", "no-manifest"});
    try {
      deepspeed::Checkpoint::open(dir.file("s"));
      QFAIL("opened a snapshot without its manifest");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("manifest.json") != std::string::npos, e.what());
    }
    QVERIFY(snapshot::list_snapshots(dir.path()).empty());
  }

  // A damaged rank file becomes a problem naming it and what is wrong; rank 0's files stay usable.
  void damagedRankFileIsNamed_data() {
    QTest::addColumn<QString>("damage");
    QTest::addColumn<QString>("says");
    for (const auto& r : kDamageRows) QTest::newRow(r.damage) << r.damage << r.says;
  }
  void damagedRankFileIsNamed() {
    QFETCH(QString, damage);
    QFETCH(QString, says);
    std::vector<RowSnapshot> rows;
    for (const auto& r : kDamageRows)
      rows.push_back({r.damage, "zero2_fp16_ws2", "s", {"--damage", r.damage}});
    const auto sn = deepspeed::Checkpoint::open(row_snapshot(rows, damage.toStdString()));
    const auto* p = problem(sn->catalog(), "rank-file-unreadable");
    QVERIFY2(p, all_problems(sn->catalog()).c_str());
    QCOMPARE(p->file, std::string("zero_pp_rank_1_mp_rank_00_optim_states.pt"));
    QVERIFY2(p->message.find(says.toStdString()) != std::string::npos, p->message.c_str());
    QVERIFY(sn->model_file().root.is_dict());  // rank 0's files read fine
    const auto r = diagnose_on_cpu(*sn);
    QVERIFY(r.has_error());
  }

  void badManifestIsNamed_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("says");
    QTest::newRow("not json") << R"({"format": "ckptdoc-snapshot",)"
                              << "not valid JSON";
    QTest::newRow("version") << R"({"format": "ckptdoc-snapshot", "format_version": 9})"
                             << "key 'format_version'";
    QTest::newRow("ranks")
        << R"({"format": "ckptdoc-snapshot", "format_version": 1, "tag": "s", "world_size": 3,
                              "live": {"global_steps": 1}, "ranks": [], "files": {}})"
        << "3 ranks";
    QTest::newRow("escape")
        << R"({"format": "ckptdoc-snapshot", "format_version": 1, "tag": "s", "world_size": 1,
                              "live": {"global_steps": 1}, "files": {},
                              "ranks": [{"rank": 0, "file": "../../etc/passwd", "bytes": 1}]})"
        << "not a plain file name";
  }
  void badManifestIsNamed() {
    QFETCH(QString, text);
    QFETCH(QString, says);
    test::TempDir dir;
    fs::create_directories(dir.file("s"));
    write_file(dir.file("s/manifest.json"), text.toStdString());
    try {
      snapshot::Manifest::read(dir.file("s"));
      QFAIL("read a bad manifest");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("manifest.json") != std::string::npos, e.what());
      QVERIFY2(std::string(e.what()).find(says.toStdString()) != std::string::npos, e.what());
    }
  }

  // Gradients with NaN/Inf: the finding names the param that holds them (fc1.weight starts group 0 of rank
  // 0).
  void nonFiniteGradientsNameTheirParam_data() {
    QTest::addColumn<QString>("fixture");
    QTest::addColumn<int>("severity");
    QTest::newRow("fp16: skipped step") << "zero2_fp16_ws2" << int(analysis::Severity::Warning);
    QTest::newRow("bf16: written into the state") << "zero2_bf16_ws2" << int(analysis::Severity::Error);
    QTest::newRow("zero3 fp16") << "zero3_fp16_ws2" << int(analysis::Severity::Warning);
  }
  void nonFiniteGradientsNameTheirParam() {
    QFETCH(QString, fixture);
    QFETCH(int, severity);
    test::TempDir dir;
    make_snapshot(fixture.toStdString(), dir.file("s"), {"--grads", "nan"});
    const auto r = diagnose_on_cpu(*deepspeed::Checkpoint::open(dir.file("s")));
    QVERIFY(r.live && r.live->grads_present);
    QCOMPARE(r.live->grad_nonfinite, uint64_t(2));
    const auto* f = find(r, "gradient-nonfinite");
    QVERIFY2(f, test::read_text(dir.file("s/manifest.json")).c_str());
    QCOMPARE(int(f->severity), severity);
    QCOMPARE(f->params, std::vector<std::string>{"fc1.weight"});
  }

  void recordedGradientNormIsTheirs() {
    test::TempDir dir;
    const std::string out =
        make_snapshot("zero2_fp16_ws2", dir.file("s"), {"--grads", "finite", "--print-grad-norm"});
    const double want = std::stod(out);
    const auto r = diagnose_on_cpu(*deepspeed::Checkpoint::open(dir.file("s")));
    QVERIFY(r.live && r.live->recorded_grad_norm);
    QVERIFY2(std::abs(*r.live->recorded_grad_norm - want) <= 1e-9 * want,
             (std::to_string(*r.live->recorded_grad_norm) + " vs " + std::to_string(want)).c_str());
    QCOMPARE(r.live->grad_nonfinite, uint64_t(0));
    QVERIFY(!find(r, "gradient-nonfinite"));
  }

  void liveNumbersGiveTheirFindings_data() {
    QTest::addColumn<QString>("live");
    QTest::addColumn<QString>("code");
    QTest::addColumn<int>("severity");
    for (const auto& r : kLiveRows) QTest::newRow(r.tag) << r.live << r.code << int(r.severity);
  }
  void liveNumbersGiveTheirFindings() {
    QFETCH(QString, live);
    QFETCH(QString, code);
    QFETCH(int, severity);
    // Each row's snapshot with its live numbers, and its own healthy one.
    std::vector<RowSnapshot> rows;
    for (const auto& r : kLiveRows) {
      rows.push_back({r.tag, "zero2_fp16_ws2", "s", {"--live", r.live}});
      rows.push_back({std::string(r.tag) + " healthy", "zero2_fp16_ws2", "h", {}});
    }
    const std::string tag = QTest::currentDataTag();
    const auto r = diagnose_on_cpu(*deepspeed::Checkpoint::open(row_snapshot(rows, tag)));
    const auto* f = find(r, code.toStdString());
    QVERIFY2(f, ("no " + code.toStdString()).c_str());
    QCOMPARE(int(f->severity), severity);
    // and nothing else live-only fires on a healthy snapshot
    const auto healthy = diagnose_on_cpu(*deepspeed::Checkpoint::open(row_snapshot(rows, tag + " healthy")));
    // Healthy: no error or warning (the padding count is an info not-analysed finding).
    std::string found;
    for (const auto& h : healthy.findings)
      if (h.severity != analysis::Severity::Info) found += h.code + " ";
    QVERIFY2(found.empty(), found.c_str());
  }

  // convert: every written file equals the checkpoint DeepSpeed wrote (pickle tree, storages), plus `latest`.
  void convertWritesTheCheckpointBack_data() {
    QTest::addColumn<QString>("fixture");
    for (const char* f : kFixtures) QTest::newRow(f) << QString(f);
  }
  void convertWritesTheCheckpointBack() {
    QFETCH(QString, fixture);
    test::TempDir dir;
    make_snapshot(fixture.toStdString(), dir.file("s"));
    const auto sn = deepspeed::Checkpoint::open(dir.file("s"));
    const auto r = snapshot::convert_to_checkpoint(*sn, dir.file("ckpt"));
    std::string why;
    for (const auto& m : r.mismatches) why += m + "\n";
    for (const auto& m : r.invariant_failures) why += m + "\n";
    QVERIFY2(r.verified(), why.c_str());
    QCOMPARE(test::read_text(dir.file("ckpt/latest")), std::string("global_step5"));
    for (const auto& f : fs::directory_iterator(tag_dir(fixture.toStdString()))) {
      const TorchFile orig = TorchFile::open(f.path().string());
      const TorchFile out = TorchFile::open(dir.file("ckpt/global_step5/" + f.path().filename().string()));
      QVERIFY(orig.root.equals(out.root));
      QCOMPARE(out.storages.size(), orig.storages.size());
      for (size_t i = 0; i < orig.storages.size(); ++i) {
        const auto a = orig.storages[i]->bytes(), b = out.storages[i]->bytes();
        QVERIFY(std::equal(a.begin(), a.end(), b.begin(), b.end()));
      }
    }
    // nothing else was left behind
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.insert(e.path().filename().string());
    QCOMPARE(names, (std::set<std::string>{"ckpt", "s"}));
  }

  // A Cancel that arrives once every file is written (at the partial folder's first fsync, after `latest`),
  // after the writes' own checks, still publishes nothing: Cancelled, no output, no partial folder. Before,
  // the folder was renamed into place, then the verifying stage threw Cancelled with the output in place.
  void convertCancelledAfterTheLastWritePublishesNothing() {
    test::TempDir dir;
    make_snapshot("zero2_fp16_ws2", dir.file("s"));
    const auto sn = deepspeed::Checkpoint::open(dir.file("s"));
    Progress progress;
    test::CancelAtDirSyncIo io(progress, ".ckptdoc-partial-");
    const ScopedFileIo scoped(io);
    QVERIFY_THROWS_EXCEPTION(Cancelled,
                             snapshot::convert_to_checkpoint(*sn, dir.file("ckpt"), {}, &progress));
    QVERIFY(io.cancelled);  // else the test shows nothing
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.insert(e.path().filename().string());
    QCOMPARE(names, (std::set<std::string>{"s"}));
  }

  void convertRefusesOverlapsAndNonEmptyOutput() {
    test::TempDir dir;
    make_snapshot("zero2_fp16_ws2", dir.file("s"));
    const auto sn = deepspeed::Checkpoint::open(dir.file("s"));
    QVERIFY_THROWS_EXCEPTION(Error, snapshot::convert_to_checkpoint(*sn, dir.file("s/out")));
    fs::create_directories(dir.file("full"));
    write_file(dir.file("full/x"), "x");
    QVERIFY_THROWS_EXCEPTION(Error, snapshot::convert_to_checkpoint(*sn, dir.file("full")));
    QCOMPARE(test::read_text(dir.file("full/x")), std::string("x"));
  }

  void timelineFindsSeriesProblems() {
    snapshot::Timeline t;
    auto point = [](const std::string& tag, int64_t step, double scale, int64_t skipped, double norm) {
      snapshot::SnapshotSummary s;
      s.dir = "/run/" + tag;
      s.tag = tag;
      s.global_steps = step;
      s.loss_scale = scale;
      s.skipped_steps = skipped;
      s.grad_norm = norm;
      return s;
    };
    QVERIFY(t.add(point("a", 100, 65536, 0, 1.0)).empty());
    QVERIFY(t.add(point("b", 200, 32768, 1, 1.2)).empty());
    QVERIFY(t.add(point("c", 300, 16384, 2, 0.9)).empty());
    const auto spike = t.add(point("d", 400, 8192, 3, 30.0));
    QCOMPARE(spike.size(), size_t(1));
    QCOMPARE(spike[0].code, std::string("gradient-norm-spike"));
    const auto bad = t.add(point("e", 500, 128, 80, 1.0));
    std::set<std::string> got;
    for (const auto& f : bad) got.insert(f.code);
    QCOMPARE(got, (std::set<std::string>{"loss-scale-collapse", "steps-skipped"}));
    QCOMPARE(t.points().back().worst_severity, std::string("warning"));
    // an earlier step added late lands in order; a re-dumped folder replaces its point
    t.add(point("z", 50, 65536, 0, 1.0));
    QCOMPARE(t.points().front().tag, std::string("z"));
    t.add(point("e", 500, 128, 80, 1.0));
    QCOMPARE(t.points().size(), size_t(6));
    t.mark_deleted("/run/a");
    QVERIFY(t.points()[1].deleted);
  }

  // The watcher sees a folder being written as pending, reports it once its manifest appears, and notices it
  // going away; each wait returns on the file-system event, not on a timer.
  void watcherFollowsAFolder() {
    test::TempDir dir, src;
    make_snapshot("zero2_fp16_ws2", src.file("s"));
    fs::create_directories(dir.file("run"));
    snapshot::SnapshotWatcher w(dir.file("run"));
    QVERIFY(w.event_driven());
    QVERIFY(w.wait(0).empty());
    fs::create_directories(dir.file("run/s"));
    fs::copy_file(src.file("s/rank_00000.h5"), dir.file("run/s/rank_00000.h5"));
    auto ev = w.wait(60000);
    QCOMPARE(ev.size(), size_t(1));
    QCOMPARE(ev[0].kind, snapshot::WatchEvent::Kind::Pending);
    fs::copy_file(src.file("s/rank_00001.h5"), dir.file("run/s/rank_00001.h5"));
    fs::copy_file(src.file("s/manifest.json"), dir.file("run/s/.manifest.json.tmp"));
    fs::rename(dir.file("run/s/.manifest.json.tmp"), dir.file("run/s/manifest.json"));
    ev = w.wait(60000);
    while (!ev.empty() && ev.front().kind == snapshot::WatchEvent::Kind::Pending) ev.erase(ev.begin());
    if (ev.empty()) ev = w.wait(60000);
    QCOMPARE(ev.size(), size_t(1));
    QCOMPARE(ev[0].kind, snapshot::WatchEvent::Kind::Committed);
    QCOMPARE(ev[0].tag, std::string("s"));
    fs::remove_all(dir.file("run/s"));
    ev = w.wait(60000);
    QCOMPARE(ev.size(), size_t(1));
    QCOMPARE(ev[0].kind, snapshot::WatchEvent::Kind::Removed);
    w.stop();
    QVERIFY(w.wait(-1).empty());
  }
};

CKPTDOC_TEST_MAIN(TestSnapshot)
#include "test_snapshot.moc"
