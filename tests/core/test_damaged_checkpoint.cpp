// Damaged DeepSpeed checkpoints: a rank file truncated at many points and with bytes flipped across it must
// give a clear error or a correct partial report, never a crash, a hang or a silently wrong clean result.
#include <QtTest>
#include <filesystem>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/error.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

struct Outcome {
  int errors = 0, reported = 0, clean = 0;
};

// Opens and diagnoses; a thrown Error counts as a clear error, a report with an error finding as reported.
void examine(const std::string& dir, Outcome& o) {
  try {
    const auto ckpt = deepspeed::Checkpoint::open(dir);
    analysis::DiagnoseOptions opt;
    opt.device = DeviceKind::Cpu;
    opt.threads = 1;
    const auto report = analysis::diagnose(*ckpt, opt);
    if (report.has_error())
      ++o.reported;
    else
      ++o.clean;
  } catch (const Error&) {
    ++o.errors;
  }
}

}  // namespace

class TestDamagedCheckpoint : public QObject {
  Q_OBJECT

 private slots:
  void truncatedRankFileIsAlwaysNoticed() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    test::copy_tree(test::deepspeed_fixture("zero1_fp16_ws2") + "/checkpoint", ckpt);
    const std::string victim = ckpt + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt";
    const std::string original = test::read_text(victim);
    Outcome o;
    int cuts = 0;
    for (size_t n = 0; n < original.size(); n += 1013, ++cuts) {
      test::write_text(victim, original.substr(0, n));
      examine(ckpt, o);
    }
    test::write_text(victim, original);
    qInfo("truncations: %d, errors: %d, reported: %d, clean: %d", cuts, o.errors, o.reported, o.clean);
    QCOMPARE(o.clean, 0);  // a cut rank file never passes as healthy
    QVERIFY(cuts > 400);
  }

  void flippedBytesNeverCrash() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", ckpt);
    const std::string victim = ckpt + "/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt";
    const std::string original = test::read_text(victim);
    Outcome o;
    int flips = 0;
    // Every byte of the pickle and headers (the first 4 KiB), then a stride through the tensor data.
    for (size_t i = 0; i < original.size(); i += (i < 4096 ? 1 : 997), ++flips) {
      std::string damaged = original;
      damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
      test::write_text(victim, damaged);
      examine(ckpt, o);
    }
    qInfo("byte flips: %d, errors: %d, reported: %d, clean: %d", flips, o.errors, o.reported, o.clean);
    QCOMPARE(o.errors + o.reported + o.clean, flips);
    QVERIFY(o.errors + o.reported > 0);
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestDamagedCheckpoint)
#include "test_damaged_checkpoint.moc"
