// Damaged DeepSpeed checkpoints: missing, empty, truncated or garbage rank files and mismatched world sizes
// give named problems and a partial catalog; only a folder with nothing usable throws. Fixtures are copied
// before damage (they are read-only).
#include <QtTest>
#include <filesystem>
#include <fstream>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/export.h"
#include "deepspeed_reference.h"

using namespace ckptdoc;
using namespace ckptdoc::deepspeed;
namespace fs = std::filesystem;

namespace {

const Problem* find_problem(const Catalog& c, const std::string& code) {
  for (const auto& p : c.problems)
    if (p.code == code) return &p;
  return nullptr;
}

std::string all_problems(const Catalog& c) {
  std::string s;
  for (const auto& p : c.problems) s += p.code + ": " + p.message + "\n";
  return s;
}

std::string copy_fixture(const test::TempDir& tmp, const std::string& name) {
  const std::string dst = tmp.file("ck");
  test::copy_tree(test::deepspeed_fixture(name) + "/checkpoint", dst);
  return dst;
}

void truncate_file(const std::string& path, uint64_t size) {
  fs::resize_file(path, size);
}

}  // namespace

class TestDeepspeedDamage : public QObject {
  Q_OBJECT

 private slots:
  void missingOptimRank() {
    test::TempDir tmp;
    const auto ck_dir = copy_fixture(tmp, "zero2_fp16_ws2");
    fs::remove(ck_dir + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt");
    const auto ck = Checkpoint::open(ck_dir);
    const Catalog& c = ck->catalog();
    const Problem* p = find_problem(c, "rank-file-missing");
    QVERIFY2(p, all_problems(c).c_str());
    QCOMPARE(p->ranks, std::vector<int>{1});
    QCOMPARE(c.groups.size(), size_t(2));  // the layout is still known from the model file
    QVERIFY(ck->fp32_partition(0, 0).has_value());
    try {  // the missing rank's partition is an error naming it, never an empty (or zero) value
      (void)ck->fp32_partition(0, 1);
      QFAIL("no error for the missing rank");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("dp rank 1") != std::string::npos, e.what());
    }
    const ParamData d = ck->assemble(0, 1);  // fc2.weight spans the missing rank
    QVERIFY(d.fp32.empty());
    QVERIFY(d.lp.has_value());
    try {
      export_tensors(*ck, ExportOptions{});
      QFAIL("export of a checkpoint with a missing rank must fail");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("dp rank 1") != std::string::npos, e.what());
    }
  }

  void missingZero3Ranks() {
    test::TempDir tmp;
    const auto ck_dir = copy_fixture(tmp, "zero3_fp16_ws2");
    fs::remove(ck_dir + "/global_step5/zero_pp_rank_1_mp_rank_00_model_states.pt");
    fs::remove(ck_dir + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt");
    const auto ck = Checkpoint::open(ck_dir);
    int missing = 0;
    for (const auto& p : ck->catalog().problems) missing += p.code == "rank-file-missing" ? 1 : 0;
    QCOMPARE(missing, 2);  // optimizer and model file of rank 1
  }

  void emptyRankFile() {
    test::TempDir tmp;
    const auto ck_dir = copy_fixture(tmp, "zero1_fp16_ws2");
    truncate_file(ck_dir + "/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt", 0);
    const auto ck = Checkpoint::open(ck_dir);
    const Problem* p = find_problem(ck->catalog(), "rank-file-truncated");
    QVERIFY2(p, all_problems(ck->catalog()).c_str());
    QCOMPARE(p->file, std::string("zero_pp_rank_0_mp_rank_00_optim_states.pt"));
    QVERIFY(p->message.find("empty") != std::string::npos);
    QCOMPARE(ck->catalog().groups.size(), size_t(2));  // rank 1 still supplies partition_count
  }

  void truncatedZip() {
    test::TempDir tmp;
    const auto ck_dir = copy_fixture(tmp, "zero2_bf16_ws2");
    const std::string f = ck_dir + "/global_step5/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt";
    truncate_file(f, fs::file_size(f) / 2);
    const auto ck = Checkpoint::open(ck_dir);
    const Problem* p = find_problem(ck->catalog(), "rank-file-truncated");
    QVERIFY2(p, all_problems(ck->catalog()).c_str());
    QCOMPARE(p->ranks, std::vector<int>{1});
    QVERIFY_THROWS_EXCEPTION(Error, ck->fp32_partition(0, 1));  // unreadable: an error, not an empty value
  }

  void garbageRankFile() {
    test::TempDir tmp;
    const auto ck_dir = copy_fixture(tmp, "zero2_fp16_ws2");
    test::write_text(ck_dir + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt",
                     "not a torch file at all\n");
    const auto ck = Checkpoint::open(ck_dir);
    QVERIFY2(find_problem(ck->catalog(), "rank-file-unreadable"), all_problems(ck->catalog()).c_str());
  }

  void extraRankFileMeansWorldSizeMismatch() {
    test::TempDir tmp;
    const auto ck_dir = copy_fixture(tmp, "zero2_fp16_ws2");
    fs::copy_file(ck_dir + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt",
                  ck_dir + "/global_step5/zero_pp_rank_2_mp_rank_00_optim_states.pt");
    const auto ck = Checkpoint::open(ck_dir);
    const Problem* p = find_problem(ck->catalog(), "world-size-mismatch");
    QVERIFY2(p, all_problems(ck->catalog()).c_str());
    QCOMPARE(p->ranks, std::vector<int>{2});
  }

  void wrongDpWorldSizeInModelFile() {
    test::TempDir tmp;
    auto r = test::run_python(test::script("fixtures/make_deepspeed_checkpoint.py"),
                              {tmp.file("ck"), "--stage", "2", "--dp", "2", "--wrong-dp-world-size", "4"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto ck = Checkpoint::open(tmp.file("ck"));
    QVERIFY2(find_problem(ck->catalog(), "world-size-mismatch"), all_problems(ck->catalog()).c_str());
    QCOMPARE(ck->catalog().groups[0].partitions.size(), size_t(2));  // layout follows partition_count
  }

  void generatorDamageOptions() {
    test::TempDir tmp;
    auto r = test::run_python(test::script("fixtures/make_deepspeed_checkpoint.py"),
                              {tmp.file("a"), "--stage", "3", "--dp", "4", "--missing-rank", "2"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    auto ck = Checkpoint::open(tmp.file("a"));
    QVERIFY(find_problem(ck->catalog(), "rank-file-missing"));
    r = test::run_python(test::script("fixtures/make_deepspeed_checkpoint.py"),
                         {tmp.file("b"), "--stage", "1", "--dp", "3", "--truncate-rank", "0"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    ck = Checkpoint::open(tmp.file("b"));
    QVERIFY2(find_problem(ck->catalog(), "rank-file-truncated"), all_problems(ck->catalog()).c_str());
  }

  void missingModelFileStillCatalogsOptimizerFiles() {
    test::TempDir tmp;
    const auto ck_dir = copy_fixture(tmp, "zero2_fp16_ws2");
    fs::remove(ck_dir + "/global_step5/mp_rank_00_model_states.pt");
    const auto ck = Checkpoint::open(ck_dir);
    QVERIFY(find_problem(ck->catalog(), "model-file-missing"));
    QCOMPARE(ck->catalog().wrapper, OptimizerWrapper::Zero12);
    QVERIFY(ck->fp32_partition(0, 1).has_value());
  }

  void nothingUsableThrows() {
    test::TempDir tmp;
    fs::create_directories(tmp.file("empty"));
    QVERIFY_THROWS_EXCEPTION(Error, Checkpoint::open(tmp.file("empty")));
    QVERIFY_THROWS_EXCEPTION(Error, Checkpoint::open(tmp.file("does-not-exist")));
    fs::create_directories(tmp.file("junk/global_step1"));
    test::write_text(tmp.file("junk/latest"), "global_step1");
    test::write_text(tmp.file("junk/global_step1/mp_rank_00_model_states.pt"), "junk");
    test::write_text(tmp.file("junk/global_step1/zero_pp_rank_0_mp_rank_00_optim_states.pt"), "");
    try {
      Checkpoint::open(tmp.file("junk"));
      QFAIL("a folder of unreadable files must not open");
    } catch (const Error& e) {
      QVERIFY(std::string(e.what()).find("no readable") != std::string::npos);
    }
    // `latest` naming a folder that is not there.
    test::write_text(tmp.file("junk/latest"), "global_step9");
    QVERIFY_THROWS_EXCEPTION(Error, Checkpoint::open(tmp.file("junk")));
  }
};

CKPTDOC_TEST_MAIN(TestDeepspeedDamage)
#include "test_deepspeed_damage.moc"
