// A rank file that shrinks while it is memory-mapped (a save still running, another host on NFS): every
// reader reports "changed while being read" naming the file, instead of dying of SIGBUS or using the zero
// pages put where the bytes were; no output is written from it.
#include <unistd.h>

#include <QtTest>
#include <filesystem>
#include <thread>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/export.h"
#include "ckptdoc/sources/deepspeed/synthesize.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

std::string synth(const test::TempDir& dir, int64_t params) {
  deepspeed::SynthOptions o;
  o.dp = 2;
  o.target_params = params;
  return deepspeed::write_synthetic_checkpoint(dir.file("ck"), o).save_dir;
}

std::string rank1_optim(const std::string& save_dir) {
  return save_dir + "/global_step10/zero_pp_rank_1_mp_rank_00_optim_states.pt";
}

void expect_changed_error(const std::function<void()>& f, const std::string& file) {
  try {
    f();
    QFAIL("no error although a rank file shrank under its map");
  } catch (const Error& e) {
    const std::string m = e.what();
    QVERIFY2(m.find("changed while being read") != std::string::npos, m.c_str());
    QVERIFY2(m.find(fs::path(file).filename().string()) != std::string::npos, m.c_str());
  }
}

}  // namespace

class TestChangedFiles : public QObject {
  Q_OBJECT

 private slots:
  // The file is cut after the checkpoint was opened (pickles read, tensors mapped), before its tensors are
  // read. A file found cut while mapped, whose mapping is gone by the time the reader reports it (a universal
  // param file is mapped only while read): the error still names it. Before, it said "a file changed while
  // being read" without a name (test_changed_while_read failed 2 runs in 5 on that).
  void aDroppedChangedFileIsStillNamed() {
    test::TempDir dir;
    const std::string path = dir.file("param.pt");
    test::write_text(path, std::string(1 << 20, 'x'));
    const uint64_t before = MappedFile::change_count();
    {
      const auto f = MappedFile::open(path);
      fs::resize_file(path, 4096);
      volatile uint8_t sink = f->bytes()[(1 << 20) - 1];  // past the new end: the SIGBUS guard's zero page
      (void)sink;
      QVERIFY(f->changed());
    }  // dropped before anyone reported it
    QVERIFY(MappedFile::change_count() != before);
    expect_changed_error([] { MappedFile::throw_changed("diagnose"); }, path);
  }

  void diagnoseOfAShrunkFileIsAnError() {
    test::TempDir dir;
    const std::string ck = synth(dir, 200000);
    const auto ckpt = deepspeed::Checkpoint::open(ck);
    fs::resize_file(rank1_optim(ck), 4096);
    analysis::DiagnoseOptions opt;
    opt.device = DeviceKind::Cpu;
    expect_changed_error([&] { (void)deepspeed::diagnose(*ckpt, opt); }, rank1_optim(ck));
  }

  // Truncated during the scan itself: a thread cuts the file once the scan has started reading.
  void truncatedDuringTheScan() {
    test::TempDir dir;
    const std::string ck = synth(dir, 6000000);
    const auto ckpt = deepspeed::Checkpoint::open(ck);
    Progress progress;
    std::thread cutter([&] {
      while (progress.stage() != "scanning tensors" || progress.done() == 0) std::this_thread::yield();
      fs::resize_file(rank1_optim(ck), 4096);
    });
    analysis::DiagnoseOptions opt;
    opt.device = DeviceKind::Cpu;
    opt.threads = 1;
    bool failed = false;
    try {
      (void)deepspeed::diagnose(*ckpt, opt, &progress);
    } catch (const Error& e) {
      failed = true;
      QVERIFY2(std::string(e.what()).find("changed while being read") != std::string::npos, e.what());
    }
    cutter.join();
    // Before the SIGBUS guard the process died here. The scan may (rarely, on a busy machine) have read rank
    // 1 completely before the cut; its report was then complete and right.
    if (!failed) qInfo("the scan had read rank 1 before it was cut");
  }

  void exportWritesNothing() {
    test::TempDir dir;
    const std::string ck = synth(dir, 200000);
    const auto ckpt = deepspeed::Checkpoint::open(ck);
    fs::resize_file(rank1_optim(ck), 4096);
    const std::string out = dir.file("out.safetensors");
    expect_changed_error([&] { (void)deepspeed::export_weights(*ckpt, out, {}); }, rank1_optim(ck));
    QVERIFY(!fs::exists(out));
  }

  void repairWritesNothing() {
    test::TempDir dir;
    const std::string ck = synth(dir, 200000);
    const auto ckpt = deepspeed::Checkpoint::open(ck);
    fs::resize_file(rank1_optim(ck), 4096);
    repair::RepairRequest rq;
    rq.refresh_fp32 = true;
    rq.device = DeviceKind::Cpu;
    const std::string out = dir.file("fixed");
    // The copied model file is fine; rank 1's optimizer file is rewritten from its own (now cut) pickle tree.
    expect_changed_error([&] { (void)repair::run_repair(*ckpt, out, rq); }, rank1_optim(ck));
    QVERIFY(!fs::exists(out));
    QVERIFY(!fs::exists(out + ".ckptdoc-partial-" + std::to_string(::getpid())));
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestChangedFiles)
#include "test_changed_files.moc"
