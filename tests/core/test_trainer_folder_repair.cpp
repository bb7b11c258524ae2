// A repair of a Hugging Face Trainer checkpoint-N/ folder keeps the Trainer's own files in its output (listed
// in the plan), so resume_from_checkpoint works on it; a plain DeepSpeed save folder gets only DeepSpeed's
// files. (tests/realds/test_realds_hf_trainer.cpp resumes the real Trainer from such an output.)
#include <QTest>
#include <filesystem>

#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckptdoc;

namespace {

// The fixture's DeepSpeed save folder made into a Trainer folder: the Trainer's state and the model's config
// beside `latest`, and a folder of the Trainer's that a repair must not walk into.
std::string trainer_folder(const test::TempDir& tmp) {
  const std::string dir = tmp.file("checkpoint-5");
  test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", dir);
  test::write_text(dir + "/trainer_state.json", "{\"global_step\": 5}");
  test::write_text(dir + "/config.json", "{\"hidden_size\": 8}");
  test::write_text(dir + "/rng_state_1.pth", "rng");
  fs::create_directories(dir + "/runs");
  test::write_text(dir + "/runs/events", "tensorboard");
  return dir;
}

}  // namespace

class TestTrainerFolderRepair : public QObject {
  Q_OBJECT

 private slots:
  void repairKeepsTheTrainerFiles() {
    test::TempDir tmp;
    const std::string in = trainer_folder(tmp);
    const auto r = test::run_cli({"repair", in, "-o", tmp.file("out"), "--refresh-fp32", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    for (const char* f : {"config.json", "rng_state_1.pth", "trainer_state.json"}) {
      QVERIFY2(r.out.find(std::string("copy    ") + f + "  (the Trainer's") != std::string::npos,
               r.out.c_str());
      QCOMPARE(test::read_text(tmp.file("out/") + f), test::read_text(in + "/" + f));
    }
    QVERIFY(!fs::exists(tmp.file("out/runs")));  // folders are not the Trainer's checkpoint
    QVERIFY(fs::exists(tmp.file("out/latest")));
  }

  void plainSaveFolderGetsOnlyDeepSpeedFiles() {
    test::TempDir tmp;
    const std::string in = tmp.file("save");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", in);
    test::write_text(in + "/config.json", "{\"hidden_size\": 8}");  // no trainer_state.json: not a Trainer's
    const auto r = test::run_cli({"repair", in, "-o", tmp.file("out"), "--refresh-fp32", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(!fs::exists(tmp.file("out/config.json")));
    QVERIFY2(r.out.find("the Trainer's") == std::string::npos, r.out.c_str());
  }
};

QTEST_GUILESS_MAIN(TestTrainerFolderRepair)
#include "test_trainer_folder_repair.moc"
