// What a repair says about its output is true: not written (run_repair throws, the output is as it was),
// written and verified, or written with a verification that did not finish (cancelled or failed: the output
// stays, the result says it is unverified). A FileIo hook acts right after the output is renamed into place.
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <functional>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/synthesize.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

// Passes every call to the real file system; the hooks below change one call each.
class RealIo : public FileIo {
 public:
  int open_write(const std::string& p, int* fd) override { return real_.open_write(p, fd); }
  int write(int fd, const uint8_t* d, size_t n, size_t* w) override { return real_.write(fd, d, n, w); }
  int fsync(int fd) override { return real_.fsync(fd); }
  int close(int fd) override { return real_.close(fd); }
  int rename(const std::string& from, const std::string& to) override { return real_.rename(from, to); }
  int rename_noreplace(const std::string& from, const std::string& to) override {
    return real_.rename_noreplace(from, to);
  }
  int unlink(const std::string& p) override { return real_.unlink(p); }
  int mkdir(const std::string& p) override { return real_.mkdir(p); }
  int fsync_dir(const std::string& p) override { return real_.fsync_dir(p); }

 protected:
  FileIo& real_ = posix_io();
};

// After the rename that publishes `out`, runs `after_publish`.
class HookIo : public RealIo {
 public:
  HookIo(std::string out, std::function<void()> after_publish)
      : out_(std::move(out)), after_(std::move(after_publish)) {}
  int rename(const std::string& from, const std::string& to) override {
    return hooked(from, to, real_.rename(from, to));
  }
  int rename_noreplace(const std::string& from, const std::string& to) override {
    return hooked(from, to, real_.rename_noreplace(from, to));
  }

 private:
  int hooked(const std::string& from, const std::string& to, int err) {
    if (err == 0 && to == out_ && from.find(".ckptdoc-partial-") != std::string::npos) after_();
    return err;
  }
  std::string out_;
  std::function<void()> after_;
};

// The first file written makes `out` appear, as another writer publishing there meanwhile would.
class InterloperIo : public RealIo {
 public:
  explicit InterloperIo(std::string out) : out_(std::move(out)) {}
  int open_write(const std::string& p, int* fd) override {
    if (!done_) {
      done_ = true;
      fs::create_directories(out_);
      std::ofstream(out_ + "/theirs.txt") << "another writer's output";
    }
    return real_.open_write(p, fd);
  }

 private:
  std::string out_;
  bool done_ = false;
};

std::string synth(const test::TempDir& dir) {
  deepspeed::SynthOptions o;
  o.dp = 2;
  o.target_params = 300000;
  o.breakage = deepspeed::SynthBreak::StaleFp32;
  return deepspeed::write_synthetic_checkpoint(dir.file("ck"), o).save_dir;
}

repair::RepairRequest refresh() {
  repair::RepairRequest rq;
  rq.refresh_fp32 = true;
  rq.device = DeviceKind::Cpu;
  return rq;
}

bool clean(const std::string& dir) {
  analysis::DiagnoseOptions o;
  o.device = DeviceKind::Cpu;
  return !deepspeed::diagnose(*deepspeed::Checkpoint::open(dir), o).has_error();
}

}  // namespace

class TestRepairStates : public QObject {
  Q_OBJECT

 private slots:
  void writtenAndVerified() {
    test::TempDir dir;
    const auto ckpt = deepspeed::Checkpoint::open(synth(dir));
    const auto r = repair::run_repair(*ckpt, dir.file("out"), refresh());
    QVERIFY(r.state == repair::OutputState::Verified);
    QVERIFY(r.ok());
    QVERIFY(r.verification_error.empty());
    QCOMPARE(r.output_catalog.tag, ckpt->catalog().tag);
  }

  // Cancelled after the output is in place: the result says written, unverified, cancelled; the output stays
  // and is the complete repair (diagnosed clean on its own). Before, run_repair threw Cancelled here and
  // every front end said nothing was written.
  void cancelDuringVerification() {
    test::TempDir dir;
    const auto ckpt = deepspeed::Checkpoint::open(synth(dir));
    const std::string out = dir.file("out");
    Progress progress;
    HookIo io(fs::absolute(out).lexically_normal().string(), [&] { progress.cancel(); });
    repair::RepairResult r;
    try {
      r = repair::run_repair(*ckpt, out, refresh(), &progress, io);
    } catch (const Cancelled&) {
      QFAIL("run_repair threw Cancelled although the output was already in place");
    }
    QVERIFY(r.state == repair::OutputState::VerificationIncomplete);
    QVERIFY(r.verification_cancelled);
    QVERIFY(!r.ok());
    QVERIFY(fs::exists(out + "/latest"));
    QVERIFY(clean(out));
  }

  // The verification fails (the output's rank files vanish after the rename): written, unverified, the error
  // named; the output folder is kept.
  void verificationErrorKeepsTheOutput() {
    test::TempDir dir;
    const auto ckpt = deepspeed::Checkpoint::open(synth(dir));
    const std::string out = dir.file("out");
    HookIo io(fs::absolute(out).lexically_normal().string(), [&] {
      for (const auto& f : fs::directory_iterator(out + "/global_step10")) fs::remove(f.path());
    });
    repair::RepairResult r;
    try {
      r = repair::run_repair(*ckpt, out, refresh(), nullptr, io);
    } catch (const Error& e) {
      QFAIL(("run_repair threw although the output was in place: " + std::string(e.what())).c_str());
    }
    QVERIFY(r.state == repair::OutputState::VerificationIncomplete);
    QVERIFY(!r.verification_cancelled);
    QVERIFY2(r.verification_error.find("no model-states or optimizer-states files") != std::string::npos,
             r.verification_error.c_str());
    QVERIFY(fs::exists(out + "/latest"));
  }

  // The output appears while the repair writes (another writer published there): the repair throws saying so,
  // and the other output is whole; none of this repair's files remain. Before, the later rename replaced it.
  void anOutputPublishedMeanwhileIsNeverReplaced() {
    test::TempDir dir;
    const auto ckpt = deepspeed::Checkpoint::open(synth(dir));
    const std::string out = fs::absolute(dir.file("out")).lexically_normal().string();
    InterloperIo io(out);
    try {
      repair::run_repair(*ckpt, out, refresh(), nullptr, io);
      QFAIL("the repair replaced an output another process published meanwhile");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("another process published") != std::string::npos, e.what());
    }
    QCOMPARE(test::files_in(out), std::vector<std::string>{"theirs.txt"});
    for (const auto& e : fs::directory_iterator(dir.path()))
      QVERIFY2(e.path().filename().string().find(".ckptdoc-") == std::string::npos, e.path().c_str());
  }

  // The same for one file: an AtomicFile made while its path was free never replaces a file created
  // meanwhile.
  void anAtomicFileNeverReplacesAFileCreatedMeanwhile() {
    test::TempDir dir;
    const std::string path = dir.file("w.safetensors");
    {
      AtomicFile f(path);
      f.write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("ours"), 4));
      std::ofstream(path) << "theirs";
      QVERIFY_THROWS_EXCEPTION(Error, f.commit());
    }
    QCOMPARE(test::read_text(path), std::string("theirs"));
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"w.safetensors"});
    {
      AtomicFile f(path);  // existing when made: the caller decided it may be replaced
      f.write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("ours"), 4));
      f.commit();
    }
    QCOMPARE(test::read_text(path), std::string("ours"));
  }

  // A cancel while writing: nothing written, the existing (--force) output untouched.
  void cancelWhileWritingLeavesTheOldOutput() {
    test::TempDir dir;
    const std::string in = synth(dir);
    const auto ckpt = deepspeed::Checkpoint::open(in);
    const std::string out = dir.file("out");
    QVERIFY(repair::run_repair(*ckpt, out, refresh()).ok());
    const auto before = test::files_in(out + "/global_step10");
    Progress progress;
    progress.cancel();
    auto rq = refresh();
    rq.force = true;
    QVERIFY_THROWS_EXCEPTION(Cancelled, repair::run_repair(*ckpt, out, rq, &progress));
    QCOMPARE(test::files_in(out + "/global_step10"), before);
    QVERIFY(clean(out));
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestRepairStates)
#include "test_repair_states.moc"
