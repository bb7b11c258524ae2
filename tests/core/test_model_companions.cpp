// A model folder's config and tokenizer files go with its weights into an exported folder (so from_pretrained
// loads it), and never over a file already there: the copy is listed, a different file kept and named.
#include <QTest>
#include <filesystem>

#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/weights/model_companions.h"
#include "test_support.h"

using namespace ckptdoc;
using namespace ckptdoc::weights;
namespace fs = std::filesystem;

namespace {

using Names = std::vector<std::string>;

// A Hugging Face folder: one weights file, a config, a tokenizer and a file that is not the model's.
void model_folder(const std::string& dir) {
  fs::create_directories(dir);
  const std::vector<float> w{1.5f, -2.0f, 0.25f, 3.0f};
  write_safetensors_file(
      dir + "/model.safetensors",
      {{"w", Tensor::from_bytes(DType::F32, {2, 2},
                                std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(w.data()),
                                                     reinterpret_cast<const uint8_t*>(w.data()) + 16))}},
      {{"format", "pt"}});
  test::write_text(dir + "/config.json", "{\"hidden_size\": 2}");
  test::write_text(dir + "/tokenizer.json", "{\"version\": \"1.0\"}");
  test::write_text(dir + "/trainer_state.json", "{\"global_step\": 4}");
}

}  // namespace

class TestModelCompanions : public QObject {
  Q_OBJECT

 private slots:
  void onlyAModelFolderHasCompanions() {
    test::TempDir tmp;
    model_folder(tmp.file("m"));
    QCOMPARE(model_companions(tmp.file("m")), (Names{"config.json", "tokenizer.json"}));
    fs::remove(tmp.file("m/config.json"));
    QCOMPARE(model_companions(tmp.file("m")), Names{});  // no config: not a model folder to complete
  }

  void copiesWithoutReplacing() {
    test::TempDir tmp;
    model_folder(tmp.file("m"));
    fs::create_directories(tmp.file("out"));
    test::write_text(tmp.file("out/tokenizer.json"), "{\"version\": \"2.0\"}");  // the user's own
    auto c = copy_companions(tmp.file("m"), tmp.file("out"), model_companions(tmp.file("m")));
    QCOMPARE(c.copied, Names{"config.json"});
    QCOMPARE(c.different, Names{"tokenizer.json"});
    QCOMPARE(test::read_text(tmp.file("out/tokenizer.json")), std::string("{\"version\": \"2.0\"}"));
    QCOMPARE(test::read_text(tmp.file("out/config.json")), std::string("{\"hidden_size\": 2}"));
    c = copy_companions(tmp.file("m"), tmp.file("out"), {"config.json"});
    QCOMPARE(c.same, Names{"config.json"});
    QVERIFY(c.copied.empty());
  }

  // As a user runs it: a folder re-sharded into another folder carries its config along; run again with
  // --force over a changed config, the weights are replaced and the config is kept, with a warning.
  void exportIntoAFolderCarriesTheConfig() {
    test::TempDir tmp;
    model_folder(tmp.file("m"));
    auto r = test::run_cli({"export", tmp.file("m"), "-o", tmp.file("out"), "--max-shard-size", "5GB"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("for from_pretrained: config.json tokenizer.json") != std::string::npos,
             r.out.c_str());
    QCOMPARE(test::files_in(tmp.file("out")), (Names{"config.json", "model.safetensors", "tokenizer.json"}));
    test::write_text(tmp.file("out/config.json"), "{\"hidden_size\": 3}");
    r = test::run_cli({"export", tmp.file("m"), "-o", tmp.file("out"), "--max-shard-size", "5GB", "--force"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.err.find("config.json was already there and differs") != std::string::npos, r.err.c_str());
    QCOMPARE(test::read_text(tmp.file("out/config.json")), std::string("{\"hidden_size\": 3}"));
    // A single output file takes nothing along.
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", tmp.file("m"), "-o", tmp.file("one.safetensors")}), 0);
    QCOMPARE(test::files_in(tmp.path()), (Names{"m", "one.safetensors", "out"}));
  }
};

QTEST_GUILESS_MAIN(TestModelCompanions)
#include "test_model_companions.moc"
