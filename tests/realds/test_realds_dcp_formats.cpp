// DCP storage variants of torch 2.10 beyond torch.save items (#28, #28's list of variants), each saved by
// torch's own dcp.save (tests/realds/dcp_format_save.py, judges' venv, one process): a tiny model state dict
// with one NaN in model.0.weight and a bf16 tensor.
//  - FileSystemWriter(serialization_format=SAFETENSORS): `.distcp` files that are safetensors. ckptdoc does
//  not
//    read them yet; every command must refuse by the file's name and the format, never report on bytes it did
//    not decode (before: an unclear "expected a torch.save file" from export and inspect's metadata
//    all-clear).
//  - FileSystemWriter(_extensions=[ZStandard()]): every storage item "stream.zstd/1" (torch's own
//  FileSystemReader
//    reads it back equal, run.json). Not decoded (no libzstd here); refused naming .metadata, the item, its
//    .distcp file and the transform (before: the item and transform only, no file).
//  - HuggingFaceStorageWriter: model-0000i-of-0000N.safetensors and an index, read as a Hugging Face folder;
//    export must equal the state dict torch saved (its own HuggingFaceStorageReader reads it back equal,
//    run.json "dcp_load"), and diagnose must see the NaN.
//  - HuggingFaceStorageWriter(save_distributed=True) at world 2 without consolidation: each rank's
//    shard-0000r-….safetensors holds its piece of model.0.weight (rows 0-5, 6-11) under the tensor's own
//    name, and no file records a tensor's whole shape. Not assembled; refused naming the file and the piece
//    (before: read as whole tensors of half the rows, exported with exit 0 and only a tensor-duplicated
//    warning). Also with only the offset-0 pieces left (the other rank's file gone), which nothing marks as
//    pieces but DCP_SHARDING_INFO (before: read as whole tensors, export exit 0 and no word of pieces).
#include <QJsonArray>
#include <QtTest>
#include <filesystem>

#include "ckptdoc/format/safetensors.h"
#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

// The saved state dict (ref/) beside the entry's ckpt/ folder.
std::string saved_state_dict(const realds::Entry& e) {
  return std::filesystem::path(e.save_dir).parent_path().string() + "/ref/saved_state_dict.pt";
}

// The commands that read a save's values: each row of a refusal test runs one.
void add_reading_commands() {
  QTest::addColumn<QString>("command");
  QTest::newRow("inspect") << "inspect";
  QTest::newRow("diagnose") << "diagnose";
  QTest::newRow("export") << "export";
}

// `command` on `folder` exits 2 saying every one of `parts`, and export writes nothing.
void expect_refused(const QString& command, const std::string& folder,
                    const std::vector<std::string>& parts) {
  test::TempDir dir;
  std::vector<std::string> args = {command.toStdString(), folder};
  if (command == "export") args.insert(args.end(), {"--output", dir.file("out.safetensors")});
  const auto r = test::run_cli(args);
  const std::string said = r.out + r.err;
  QVERIFY2(r.exit_code == 2, realds::describe(r).c_str());
  for (const auto& part : parts)
    QVERIFY2(said.find(part) != std::string::npos, (part + " not in: " + said).c_str());
  QVERIFY2(said.find("chunks tile") == std::string::npos, said.c_str());  // no metadata-only all-clear
  QVERIFY(!std::filesystem::exists(dir.file("out.safetensors")));
}

}  // namespace

class TestRealdsDcpFormats : public QObject {
  Q_OBJECT

 private slots:
  void safetensorsSerializationIsRefusedByName_data() { add_reading_commands(); }
  void safetensorsSerializationIsRefusedByName() {
    QFETCH(QString, command);
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("dcp_safetensors_ws1");
    // torch wrote what the entry claims: a .distcp whose first bytes are a safetensors header
    const auto head = test::read_text(e.save_dir + "/__0_0.distcp").substr(0, 9);
    QCOMPARE(head.size(), size_t{9});
    QCOMPARE(head[8], '{');

    expect_refused(command, e.save_dir,
                   {"[unsupported]", e.save_dir + "/__0_0.distcp", "serialization_format=SAFETENSORS"});
  }

  void zstdItemsAreRefusedByFileAndTransform_data() { add_reading_commands(); }
  void zstdItemsAreRefusedByFileAndTransform() {
    QFETCH(QString, command);
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("dcp_zstd_ws1");
    const auto run = realds::parse(
        test::read_text(std::filesystem::path(e.save_dir).parent_path().string() + "/run.json"));
    QCOMPARE(run["dcp_load"].toString(), QString("ok"));  // torch decodes its own save

    expect_refused(command, e.save_dir,
                   {"[unsupported]", "/.metadata", "__0_0.distcp", "stream.zstd", "no value"});
  }

  void hfDistributedPiecesAreRefused_data() { add_reading_commands(); }
  void hfDistributedPiecesAreRefused() {
    QFETCH(QString, command);
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("dcp_hf_distributed_ws2");
    expect_refused(command, e.save_dir,
                   {"[unsupported]", "/shard-00001-model-00001-of-00001.safetensors", "DCP_SHARDING_INFO",
                    "save_distributed=True", "'model.0.weight' at [0, 0]", "no value"});
  }

  // The rank files holding a piece at a non-zero offset removed: every piece left is at offset 0 and its
  // shape is a whole tensor's shape, but not the tensor's (model.0.weight is 12 x 8, its piece 6 x 8).
  void hfDistributedOffsetZeroPiecesAloneAreRefused_data() { add_reading_commands(); }
  void hfDistributedOffsetZeroPiecesAloneAreRefused() {
    QFETCH(QString, command);
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("dcp_hf_distributed_ws2");
    test::TempDir dir;
    const std::string left = dir.file("left");
    std::filesystem::copy(e.save_dir, left, std::filesystem::copy_options::recursive);
    std::vector<std::string> kept, removed;
    for (const auto& f : std::filesystem::directory_iterator(left)) {
      const auto info =
          realds::parse(SafetensorsFile::open(f.path().string()).metadata.at("DCP_SHARDING_INFO"));
      bool at_offset = false;
      for (const auto& entry : info)
        for (const auto& o : entry.toObject()["saved_offsets"].toArray())
          at_offset = at_offset || o.toInt() != 0;
      (at_offset ? removed : kept).push_back(f.path().filename().string());
      if (at_offset) std::filesystem::remove(f.path());
    }
    QCOMPARE(removed.size(), size_t{1});
    QCOMPARE(kept, std::vector<std::string>{"shard-00001-model-00001-of-00001.safetensors"});

    expect_refused(command, left,
                   {"[unsupported]", left + "/" + kept.front(), "DCP_SHARDING_INFO", "save_distributed=True",
                    "'model.0.weight' at [0, 0]", "whole shape", "no value"});
  }

  void hfStorageWriterExportEqualsTheSavedStateDict() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint("dcp_hf_writer_ws1");
    const auto run = realds::parse(
        test::read_text(std::filesystem::path(e.save_dir).parent_path().string() + "/run.json"));
    QCOMPARE(run["dcp_load"].toString(), QString("ok"));  // torch reads its own save back equal

    test::TempDir dir;
    const auto out = dir.file("out.pt");
    const auto x = test::run_cli({"export", e.save_dir, "--output", out});
    QVERIFY2(x.exit_code == 0, realds::describe(x).c_str());
    const auto cmp = realds::python_with_deepspeed(
        {test::source_dir() + "/tests/realds/state_dict_diff.py", out, saved_state_dict(e)}, "0.19");
    QVERIFY2(cmp.exit_code == 0, realds::describe(cmp).c_str());
    const auto diff = realds::parse(cmp.out);
    QVERIFY2(diff["differ"].toObject().isEmpty() && diff["only_a"].toArray().isEmpty() &&
                 diff["only_b"].toArray().isEmpty(),
             cmp.out.c_str());

    const auto report = realds::diagnose_json(e.save_dir, 1);
    QVERIFY(realds::has_code(report, "error", "nonfinite-values"));
  }
};

QTEST_GUILESS_MAIN(TestRealdsDcpFormats)
#include "test_realds_dcp_formats.moc"
