// Progress and cancel of a self-reporting source's export and repair run through the session (#28): on the
// FSDP2 folder torch wrote (tests/fixtures/dcp/fsdp2_ws2, see tests/fixtures/dcp/README.md) the export's
// bytes rise monotonically to their total as the file is written, and a cancel asked for while the output is
// being written ends the job Cancelled with no output, no temp file or partial folder beside it, and the
// input byte for byte as it was. The writes are watched through a FileIo (the writers' own seam): no timing.
#include <QTest>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "ckptdoc/io/file_io.h"
#include "ckptdoc/session/session.h"
#include "job_watching_io.h"
#include "test_support.h"

using namespace ckptdoc;
using namespace ckptdoc::session;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) {
  return test::fixtures_dir() + "/dcp/" + name;
}

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

// Every file of a folder and its bytes.
std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file())
      out[e.path().lexically_relative(dir).string()] = test::read_text(e.path().string());
  return out;
}

bool open_source(Session& s, const std::string& path) {
  s.open(path);
  return pump(s, [&] { return s.is_open() && s.storage_source() != nullptr; });
}

// A run of `repair --reset-optimizer` through a Session, as the apps run it: its outcome (none when the
// source did not open or the job did not end) and its job.
struct RepairRun {
  std::optional<Outcome<sources::Outcome>> result;
  JobPtr job;
};

// repair --reset-optimizer of `in` into dir/fixed, its writes through `io`.
RepairRun reset_through_session(const std::string& in, const test::TempDir& dir, test::JobWatchingIo& io) {
  RepairRun run;
  Session s;
  if (!open_source(s, in)) return run;
  ScopedFileIo scoped(io);
  sources::RepairRequest request;
  request.output = dir.file("fixed");
  request.reset_optimizer = true;
  run.job = s.repair_source(request, [&](Outcome<sources::Outcome>& r) { run.result = r; });
  io.set_job(run.job);  // a stage hook is in place before the repair's first write is let through
  pump(s, [&] { return run.result.has_value(); });
  return run;
}

}  // namespace

class TestSourceProgress : public QObject {
  Q_OBJECT private slots :
      // One shard per tensor (each a file, written as its tensor is pulled): the bytes reported rise
      // monotonically, shard after shard, to the total, which is the tensors' bytes in the shards written.
      void
      exportReportsBytesUpToTheTotal() {
    Session s;
    QVERIFY(open_source(s, fixture("fsdp2_ws2")));
    test::TempDir dir;
    test::JobWatchingIo io;
    ScopedFileIo scoped(io);
    sources::ExportRequest request;
    request.output = dir.file("hf");
    request.max_shard_size = 1;  // one tensor per shard
    std::optional<Outcome<sources::ExportOutcome>> result;
    const JobPtr job = s.export_source(request, [&](Outcome<sources::ExportOutcome>& r) { result = r; });
    io.set_job(job);
    QVERIFY(pump(s, [&] { return result.has_value(); }));
    QVERIFY2(result->ok(), result->error ? result->error->message.c_str() : "");
    // The tensors' bytes: each shard less its header (an 8-byte length and the JSON).
    uint64_t tensor_bytes = 0;
    size_t shards = 0;
    for (const auto& f : test::files_in(request.output)) {
      if (f.find(".safetensors") == std::string::npos || f.find(".index.json") != std::string::npos) continue;
      const std::string file = test::read_text(request.output + "/" + f);
      uint64_t header = 0;
      for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<uint8_t>(file[static_cast<size_t>(i)]);
      tensor_bytes += file.size() - 8 - header;
      ++shards;
    }
    QVERIFY2(shards > 2, "the fixture should make several shards");
    QCOMPARE(job->total(), tensor_bytes);
    QCOMPARE(job->done(), tensor_bytes);  // all of it once done
    const auto samples = io.samples();
    QVERIFY(samples.size() > shards);  // a write per shard, and the index
    size_t rises = 0;
    for (size_t i = 1; i < samples.size(); ++i) {
      QCOMPARE(samples[i].total, tensor_bytes);  // one stage while the shards are written
      QVERIFY(samples[i].done >= samples[i - 1].done);
      QVERIFY(samples[i].done <= tensor_bytes);
      rises += samples[i].done > samples[i - 1].done ? 1 : 0;
    }
    QVERIFY2(rises >= shards - 1, "the bytes did not rise shard after shard");
  }

  // A cancel after the second shard was written: Cancelled, nothing published and nothing left behind (the
  // shards already written go with the partial folder), the input byte for byte as it was.
  void cancelledExportLeavesNothing() {
    Session s;
    QVERIFY(open_source(s, fixture("fsdp2_ws2")));
    test::TempDir dir;
    const auto before = contents(fixture("fsdp2_ws2"));
    test::JobWatchingIo io(/*cancel_at=*/2);
    ScopedFileIo scoped(io);
    sources::ExportRequest request;
    request.output = dir.file("hf");
    request.max_shard_size = 1;  // one tensor per shard
    std::optional<Outcome<sources::ExportOutcome>> result;
    const JobPtr job = s.export_source(request, [&](Outcome<sources::ExportOutcome>& r) { result = r; });
    io.set_job(job);
    QVERIFY(pump(s, [&] { return result.has_value(); }));
    QVERIFY(result->error.has_value());
    QCOMPARE(std::string(error_kind_name(result->error->kind)), std::string("cancelled"));
    QCOMPARE(job->state(), JobState::Cancelled);
    const auto samples = io.samples();
    QVERIFY(samples.size() >= 2 && samples[1].done > 0 && samples[1].done < samples[1].total);  // part way
    QVERIFY(test::files_in(dir.path()).empty());  // no output, no partial folder, no temp file
    QVERIFY(contents(fixture("fsdp2_ws2")) == before);
  }

  // Shards into a folder the user keeps other files in (no weights files yet): a cancel after the second
  // shard leaves the folder as it was, its own file alone and none of the shards written before the cancel.
  void cancelledExportIntoAFolderLeavesItAsItWas() {
    Session s;
    QVERIFY(open_source(s, fixture("fsdp2_ws2")));
    test::TempDir dir;
    const std::string out = dir.file("hf");
    std::filesystem::create_directories(out);
    test::write_text(out + "/README.md", "the user's own file\n");
    test::JobWatchingIo io(/*cancel_at=*/2);
    ScopedFileIo scoped(io);
    sources::ExportRequest request;
    request.output = out;
    request.max_shard_size = 1;  // one tensor per shard
    std::optional<Outcome<sources::ExportOutcome>> result;
    const JobPtr job = s.export_source(request, [&](Outcome<sources::ExportOutcome>& r) { result = r; });
    io.set_job(job);
    QVERIFY(pump(s, [&] { return result.has_value(); }));
    QVERIFY(result->error.has_value());
    QCOMPARE(std::string(error_kind_name(result->error->kind)), std::string("cancelled"));
    QCOMPARE(test::files_in(out), std::vector<std::string>{"README.md"});
    QCOMPARE(test::read_text(out + "/README.md"), std::string("the user's own file\n"));
  }

  // --force into a folder that holds an older family of the same shard names: a cancel after the second shard
  // leaves every older file as it was (the new ones are written under staging names and renamed into place
  // only once all are written), and no staged file beside them.
  void cancelledForcedExportKeepsTheOlderShards() {
    Session s;
    QVERIFY(open_source(s, fixture("fsdp2_ws2")));
    test::TempDir dir;
    sources::ExportRequest request;
    request.max_shard_size = 1;  // one tensor per shard
    std::optional<Outcome<sources::ExportOutcome>> result;
    request.output = dir.file("names");  // learns the shard names this export writes
    s.export_source(request, [&](Outcome<sources::ExportOutcome>& r) { result = r; });
    QVERIFY(pump(s, [&] { return result.has_value(); }));
    QVERIFY2(result->ok(), result->error ? result->error->message.c_str() : "");
    const std::string out = dir.file("hf");
    fs::create_directories(out);
    for (const auto& f : test::files_in(request.output)) test::write_text(out + "/" + f, "older " + f + "\n");
    test::write_text(out + "/README.md", "the user's own file\n");
    const auto before = contents(out);
    QVERIFY(before.size() > 3);

    test::JobWatchingIo io(/*cancel_at=*/2);
    ScopedFileIo scoped(io);
    request.output = out;
    request.force = true;
    result.reset();
    const JobPtr job = s.export_source(request, [&](Outcome<sources::ExportOutcome>& r) { result = r; });
    io.set_job(job);
    QVERIFY(pump(s, [&] { return result.has_value(); }));
    QVERIFY(result->error.has_value());
    QCOMPARE(std::string(error_kind_name(result->error->kind)), std::string("cancelled"));
    QVERIFY(contents(out) == before);  // every older shard and the index as they were, nothing staged beside
  }

  // A repair (reset-optimizer copies the folder, then rewrites records) reports the copy's bytes against
  // the folder's, and a cancel part way through the copy leaves no output and no partial folder.
  void cancelledRepairLeavesNothing() {
    const std::string in = fixture("fsdp2_ws2_moments_lost");
    const auto before = contents(in);
    test::TempDir dir;
    test::JobWatchingIo io(/*cancel_at=*/2, "copying");
    const auto [result, job] = reset_through_session(in, dir, io);
    QVERIFY(result.has_value());
    QVERIFY(result->error.has_value());
    QCOMPARE(std::string(error_kind_name(result->error->kind)), std::string("cancelled"));
    uint64_t folder = 0;
    for (const auto& [name, bytes] : before) folder += bytes.size();
    std::vector<test::JobWatchingIo::Sample> copying;
    for (const auto& sample : io.samples())
      if (sample.stage.rfind("copying", 0) == 0) copying.push_back(sample);
    QCOMPARE(copying.size(), size_t{2});  // stopped at the cancel
    QCOMPARE(copying[1].total, folder);   // the copy counts the input folder's bytes
    QVERIFY(copying[1].done > 0 && copying[1].done < folder);
    QVERIFY(test::files_in(dir.path()).empty());  // no output, no partial folder
    QVERIFY(contents(in) == before);
  }

  // A cancel when the repair starts checking its copy (a stage that only reads, through memory maps, so no
  // write can be watched): Progress's stage hook asks for it as the stage starts, with no timing. The check
  // stops at its next item: Cancelled, nothing published, no partial folder, the input as it was.
  void cancelWhileCheckingTheCopyPublishesNothing() {
    const std::string in = fixture("fsdp2_ws2_moments_lost");
    const auto before = contents(in);
    test::TempDir dir;
    test::JobWatchingIo io;
    io.cancel_when_starts("checking the copy");
    const auto [result, job] = reset_through_session(in, dir, io);
    QVERIFY(result.has_value());
    QVERIFY(io.cancelled_at_stage());
    QVERIFY2(result->error.has_value(), "the repair was published despite the cancel");
    QCOMPARE(std::string(error_kind_name(result->error->kind)), std::string("cancelled"));
    QCOMPARE(job->state(), JobState::Cancelled);
    QVERIFY(test::files_in(dir.path()).empty());  // no output, no partial folder
    QVERIFY(contents(in) == before);
  }

  // A cancel once the copy is written and checked (at its first directory fsync, the last step before the
  // rename): Cancelled, nothing published, no partial folder, the input as it was. Before, the rename went
  // ahead and the job ended with a result. The same last check covers every repair that writes a new folder
  // this way (DCP, Megatron, the Trainer's and Accelerate's folders: dcp::write_new_folder).
  void cancelAfterTheLastWritePublishesNothing() {
    const std::string in = fixture("fsdp2_ws2_moments_lost");
    const auto before = contents(in);
    test::TempDir dir;
    test::JobWatchingIo io;
    io.cancel_at_first_dir_sync();
    const auto [result, job] = reset_through_session(in, dir, io);
    QVERIFY(result.has_value());
    QVERIFY(io.cancelled_at_dir_sync());  // else the test shows nothing
    QVERIFY2(result->error.has_value(), "the repair was published despite the cancel");
    QCOMPARE(std::string(error_kind_name(result->error->kind)), std::string("cancelled"));
    QVERIFY(test::files_in(dir.path()).empty());  // no output, no partial folder
    QVERIFY(contents(in) == before);
  }

  // The repair's last stage re-reads the copy before it is published: it reports a total (the bytes of the
  // reset records compared, nonzero, less than the folder's) and ends with all of it done, not a bar at 0.
  void repairCheckStageReportsItsTotal() {
    const std::string in = fixture("fsdp2_ws2");
    Session s;
    QVERIFY(open_source(s, in));
    test::TempDir dir;
    sources::RepairRequest request;
    request.output = dir.file("fixed");
    request.reset_optimizer = true;
    std::optional<Outcome<sources::Outcome>> result;
    const JobPtr job = s.repair_source(request, [&](Outcome<sources::Outcome>& r) { result = r; });
    QVERIFY(pump(s, [&] { return result.has_value(); }));
    QVERIFY2(result->ok(), result->error ? result->error->message.c_str() : "");
    uint64_t folder = 0;
    for (const auto& [name, bytes] : contents(in)) folder += bytes.size();
    QCOMPARE(job->stage(), std::string("checking the copy"));  // the last stage, nothing after it
    QVERIFY2(job->total() > 0, "the check of the copy reported no total");
    QVERIFY(job->total() < folder);  // the reset records only, not the whole folder
    QCOMPARE(job->done(), job->total());
  }

  // A read-only input (an archived checkpoint): the repair's copy is rewritten in place, so its files must be
  // writable by their owner, in the app's path (progress) and the CLI's alike. Run as root the rewrite would
  // succeed regardless, so the test reads the output's modes.
  void repairOfAReadOnlyInputWritesAWritableCopy() {
    test::TempDir dir;
    const std::string in = dir.file("read-only");
    fs::copy(fixture("fsdp2_ws2_moments_lost"), in, fs::copy_options::recursive);
    for (const auto& e : fs::directory_iterator(in))
      fs::permissions(e.path(), fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                      fs::perm_options::remove);
    Session s;
    QVERIFY(open_source(s, in));
    sources::RepairRequest request;
    request.output = dir.file("fixed");
    request.reset_optimizer = true;
    std::optional<Outcome<sources::Outcome>> result;
    s.repair_source(request, [&](Outcome<sources::Outcome>& r) { result = r; });
    QVERIFY(pump(s, [&] { return result.has_value(); }));
    QVERIFY2(result->ok(), result->error ? result->error->message.c_str() : "");
    const auto cli = test::run_cli({"repair", in, "-o", dir.file("cli"), "--reset-optimizer"});
    QVERIFY2(cli.exit_code == 0, (cli.out + cli.err).c_str());
    for (const std::string& out : {request.output, dir.file("cli")})
      for (const auto& e : fs::directory_iterator(out))
        QVERIFY2((e.status().permissions() & fs::perms::owner_write) != fs::perms::none,
                 (e.path().string() + " is not writable by its owner").c_str());
  }

  // Uncancelled, the repair reports its copy, and writes what the CLI (no progress) writes, byte for byte.
  void repairWithProgressWritesWhatTheCliWrites() {
    const std::string in = fixture("fsdp2_ws2_moments_lost");
    Session s;
    QVERIFY(open_source(s, in));
    test::TempDir dir;
    sources::RepairRequest request;
    request.output = dir.file("app");
    request.reset_optimizer = true;
    std::optional<Outcome<sources::Outcome>> result;
    test::JobWatchingIo io;
    {
      ScopedFileIo scoped(io);
      const JobPtr job = s.repair_source(request, [&](Outcome<sources::Outcome>& r) { result = r; });
      io.set_job(job);
      QVERIFY(pump(s, [&] { return result.has_value(); }));
    }
    QVERIFY2(result->ok(), result->error ? result->error->message.c_str() : "");
    uint64_t last = 0;
    bool copying = false;
    for (const auto& sample : io.samples())
      if (sample.stage.rfind("copying", 0) == 0) {
        QVERIFY(sample.done >= last);
        last = sample.done;
        copying = true;
      }
    QVERIFY2(copying, "no copying stage was reported");
    const std::string cli = dir.file("cli");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", cli, "--reset-optimizer"}), 0);
    QVERIFY(contents(dir.file("app")) == contents(cli));
  }
};

QTEST_GUILESS_MAIN(TestSourceProgress)
#include "test_source_progress.moc"
