// `ckptdoc export` of a Megatron-core save against Megatron's own Hugging Face conversion (#28): NVIDIA
// Megatron Bridge 0.3.1 (scripts/judges-extra-megatron-bridge.txt), run on the CPU over gloo by realds.py
// entry v019_megatron_llama_tp2_bridge_hf (megatron_bridge_export.py: AutoBridge.save_hf_weights of the model
// megatron-core's dist_checkpointing.load read from the save). The save is v019_megatron_llama_tp2
// (megatron_llama_train.py: a Llama-shaped GPTModel at TP 2, written by megatron-core 0.16.1). The judge
// (compare_bridge_export.py) maps ckptdoc's torch_dist names to Bridge's Hugging Face ones (QKV split per
// query group, fc1 into gate/up, one tensor per layer) and compares every tensor's bytes.
#include <QJsonArray>
#include <QtTest>
#include <filesystem>
#include <fstream>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kSave = "v019_megatron_llama_tp2";
constexpr const char* kBridge = "v019_megatron_llama_tp2_bridge_hf";

// compare_bridge_export.py's verdict on an export (a safetensors file or a folder of shards) against Bridge's
// folder.
test::RunResult judge(const std::string& exported, const realds::Entry& bridge) {
  return realds::python_with_deepspeed(
      {test::source_dir() + "/tests/realds/compare_bridge_export.py", exported, bridge.save_dir}, "0.19");
}

}  // namespace

class TestRealdsMegatronBridge : public QObject {
  Q_OBJECT

 private slots:
  // Every one of Bridge's 21 Hugging Face tensors (2 layers x 9, embeddings, final norm, lm_head) is,
  // bit for bit, the mapped slice of ckptdoc's export, and every one of ckptdoc's 9 tensors is used: one
  // safetensors file, and Hugging Face shards (--max-shard-size 10KB: 5 files and an index).
  void exportEqualsMegatronBridge_data() {
    QTest::addColumn<QStringList>("extra");
    QTest::addColumn<int>("files");
    QTest::newRow("safetensors") << QStringList{} << 1;
    QTest::newRow("shards") << QStringList{"--max-shard-size", "10KB"} << 5;
  }

  void exportEqualsMegatronBridge() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QStringList, extra);
    QFETCH(int, files);
    const auto save = realds::checkpoint(kSave);
    const auto bridge = realds::checkpoint(kBridge);
    test::TempDir dir;
    const auto out = dir.file(extra.isEmpty() ? "model.safetensors" : "shards");
    std::vector<std::string> args{"export", save.save_dir, "-o", out};
    for (const auto& x : extra) args.push_back(x.toStdString());
    const auto r = test::run_cli(args);
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(r.out.find("wrote 9 tensors") != std::string::npos, r.out.c_str());
    const auto check = judge(out, bridge);
    QVERIFY2(check.exit_code == 0, realds::describe(check).c_str());
    const auto report = realds::parse(check.out);
    QCOMPARE(report["ckptdoc_files"].toInt(), files);
    QCOMPARE(report["bridge_tensors"].toInt(), 21);
    QCOMPARE(report["compared"].toInt(), 21);
    QCOMPARE(report["equal"].toInt(), 21);
    QCOMPARE(report["ckptdoc_tensors"].toInt(), 9);
    QVERIFY(report["ckptdoc_unused"].toArray().isEmpty());
  }

  // The judge can fail: one byte of the export's last tensor changed is one Hugging Face tensor that differs.
  void aChangedByteIsNamedByTheJudge() {
    REALDS_REQUIRE_DS("0.19");
    const auto save = realds::checkpoint(kSave);
    const auto bridge = realds::checkpoint(kBridge);
    test::TempDir dir;
    const auto out = dir.file("model.safetensors");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", save.save_dir, "-o", out}), 0);
    const auto size = std::filesystem::file_size(out);
    {
      std::fstream f(out, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(size - 1));
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x01);
      f.seekp(static_cast<std::streamoff>(size - 1));
      f.write(&c, 1);
    }
    const auto check = judge(out, bridge);
    QCOMPARE(check.exit_code, 1);
    const auto report = realds::parse(check.out);
    QCOMPARE(report["differ"].toArray().size(), 1);
    QCOMPARE(report["equal"].toInt(), 20);
  }
};

QTEST_GUILESS_MAIN(TestRealdsMegatronBridge)
#include "test_realds_megatron_bridge.moc"
