// DCP saves written by torch latest (#28): PyPI's newest torch (2.15.0, scripts/judges-torch-latest.txt, its
// own venv made by scripts/setup-judges.sh, no DeepSpeed), read by ckptdoc and judged by that same torch.
//  - t215_fsdp2_ws2: Tiny sharded by FSDP2 at world 2, 3 Adam steps, torchtitan's layout (make_fsdp2_dcp.py,
//    whose reference.json is torch 2.15's own reading): diagnose clean and saying what it checked, its
//    per-tensor counts torch's; export equal bit for bit to torch 2.15's dcp_to_torch_save
//    (check_dcp_export.py run by torch 2.15); repair --reset-optimizer / --drop-optimizer loaded by
//    torch 2.15's dcp.load into the FSDP2 model and Adam and a step taken (dcp_reset_check.py,
//    dcp_drop_check.py, world 2).
//  - t215_dcp_safetensors_ws1 / _ws2 (SerializationFormat.SAFETENSORS), t215_dcp_zstd_ws1 (ZStandard),
//    t215_dcp_hf_writer_ws1 (HuggingFaceStorageWriter), by dcp_format_save.py: diagnose reads all 186
//    elements and sees the NaN the save planted; export equals torch 2.15's own whole reading where torch has
//    one (zstd: dcp_to_torch_save; HF: its steps with HuggingFaceStorageReader), else the state dict it
//    saved.
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <map>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

constexpr const char* kLatest = "torch-latest";  // realds.py's name of the torch-latest venv

std::string entry_dir(const realds::Entry& e) {
  return fs::path(e.save_dir).parent_path().string();
}

// The entry was written by torch 2.15 (the venv's torch, as the entry's own record says).
void expect_written_by_torch_215(const QJsonObject& record) {
  QVERIFY2(record["torch"].toString().startsWith("2.15."), QJsonDocument(record).toJson().constData());
}

std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& f : fs::directory_iterator(dir))
    out[f.path().filename().string()] = test::read_text(f.path());
  return out;
}

// `export folder -o output`, then check_dcp_export.py under torch 2.15: the exported weights equal, name by
// name, dtype, shape and bytes, torch 2.15's dcp_to_torch_save of `folder` (or `reference_pt` when given);
// `tiny`: they also load strictly into make_fsdp2_dcp.py's model.
QJsonObject export_compared_by_torch_215(const std::string& folder, const std::string& output,
                                         const std::string& reference_pt, bool tiny = false,
                                         bool names_as_saved = false) {
  test::TempDir dir;
  const auto out = dir.file(output);
  const auto x = test::run_cli({"export", folder, "--output", out});
  if (x.exit_code != 0) {
    QTest::qFail(realds::describe(x).c_str(), __FILE__, __LINE__);
    return {};
  }
  // a Hugging Face folder's names are kept (--names-as-saved); options not asked for are left out
  std::vector<std::string> args{test::source_dir() + "/tests/fixtures/dcp/check_dcp_export.py",
                                folder,
                                out,
                                reference_pt.empty() ? "" : "--reference-pt",
                                reference_pt,
                                tiny ? "--tiny" : "",
                                names_as_saved ? "--names-as-saved" : ""};
  std::erase(args, std::string());
  const auto cmp = realds::python_with_deepspeed(args, kLatest);
  if (cmp.exit_code != 0) QTest::qFail(realds::describe(cmp).c_str(), __FILE__, __LINE__);
  return cmp.exit_code == 0 ? realds::parse(cmp.out) : QJsonObject{};
}

void add_outputs() {
  QTest::addColumn<QString>("output");
  QTest::newRow("safetensors") << "out.safetensors";
  QTest::newRow("torch.save") << "out.pt";
}

// A torch 2.15 judge script at world 2 on `args`; its --json verdict, or a failure and an empty object.
QJsonObject judge_215(const std::string& script, std::vector<std::string> args, const test::TempDir& dir,
                      const std::string& as) {
  const auto json = dir.file(as + ".json");
  args.insert(args.begin(), test::source_dir() + "/tests/realds/" + script);
  args.insert(args.end(), {"--json", json});
  const auto r = realds::launch(args, 2, kLatest);
  if (r.exit_code != 0) {
    QTest::qFail(realds::describe(r).c_str(), __FILE__, __LINE__);
    return {};
  }
  const auto verdict = realds::parse(test::read_text(json));
  expect_written_by_torch_215(verdict);
  return verdict;
}

}  // namespace

class TestRealdsDcpTorchLatest : public QObject {
  Q_OBJECT

 private slots:
  // Clean, and the verdict names what it rests on: every element, every bytes item, the CRC-32s, the Adam
  // moments against their steps; each tensor's counts are torch 2.15's (reference.json, dcp_to_torch_save).
  void fsdp2DiagnoseIsCleanAndAgreesWithTorch() {
    REALDS_REQUIRE_DS(kLatest);
    const auto e = realds::checkpoint("t215_fsdp2_ws2");
    const auto ref = realds::parse(test::read_text(entry_dir(e) + "/reference.json"));
    expect_written_by_torch_215(ref);
    const auto report = realds::diagnose_json(e.save_dir, 0);
    const auto verdict = report["verdict"].toObject();
    QVERIFY2(verdict["clean"].toBool() && report["problems"].toArray().isEmpty(),
             QJsonDocument(report).toJson().constData());
    const auto text = verdict["text"].toString().toStdString();
    for (const char* part :
         {"20 tensors, 3380 elements read from 2 files (57 of 57 bytes items)",
          "Adam moments of 5 params judged against their steps", "chunks tile every tensor",
          "the CRC-32s of 92 items match", "no NaN/Inf", "Adam step 3 for all 5 params"})
      QVERIFY2(text.find(part) != std::string::npos, (std::string(part) + " not in: " + text).c_str());
    const auto keys = ref["keys"].toObject();
    int compared = 0;
    for (const auto& t : report["tensors"].toArray()) {
      const auto mine = t.toObject();
      const auto theirs = keys[mine["key"].toString()].toObject();
      QVERIFY2(!theirs.isEmpty(), qPrintable(mine["key"].toString()));
      for (const char* count : {"numel", "nan", "inf", "zeros", "negative"})
        QVERIFY2(mine[count].toInt() == theirs[count].toInt(),
                 qPrintable(mine["key"].toString() + " " + count));
      QVERIFY(qAbs(mine["sum"].toDouble() - theirs["sum"].toDouble()) <=
              1e-9 * (1 + qAbs(theirs["sum"].toDouble())));
      ++compared;
    }
    QCOMPARE(compared, 20);
    QVERIFY2(QJsonDocument(verdict["not_checked"].toArray())
                 .toJson()
                 .contains("(the zip CRC-32s of 92 items were checked)"),
             QJsonDocument(verdict).toJson().constData());
  }

  void fsdp2ExportEqualsTorchsConversion_data() { add_outputs(); }
  void fsdp2ExportEqualsTorchsConversion() {
    QFETCH(QString, output);
    REALDS_REQUIRE_DS(kLatest);
    const auto verdict = export_compared_by_torch_215(realds::checkpoint("t215_fsdp2_ws2").save_dir,
                                                      output.toStdString(), {}, /*tiny=*/true);
    QVERIFY2(verdict["ok"].toBool() && verdict["load_state_dict"].toBool(),
             QJsonDocument(verdict).toJson().constData());
    expect_written_by_torch_215(verdict);
    QCOMPARE(verdict["tensors"].toInt(), 5);
    QCOMPARE(verdict["bytes"].toInt(), 4250);  // embed 37x16, proj 24x16 + 24 in fp32, head 5x24 + 5 in bf16
  }

  // The reset folder resumes under torch 2.15 as a fresh Adam would; the same judge on the input sees the
  // difference (it is not blind).
  void fsdp2ResetOptimizerResumesUnderTorch() {
    REALDS_REQUIRE_DS(kLatest);
    test::TempDir dir;
    const auto in = realds::copy_of(realds::checkpoint("t215_fsdp2_ws2"), dir);
    const auto before = files_of(in);
    const auto out = dir.file("reset");
    const auto r = test::run_cli({"repair", in, "-o", out, "--reset-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(realds::parse(r.out)["tensors"].toInt(), 15);
    QCOMPARE(files_of(in), before);

    const auto input = judge_215("dcp_reset_check.py", {in}, dir, "input");
    QVERIFY2(!input["identical"].toBool(),
             "the judge sees no difference on the input: it would pass anything");
    QCOMPARE(input["loaded_steps"].toArray(), (QJsonArray{3.0}));
    const auto reset = judge_215("dcp_reset_check.py", {out}, dir, "reset");
    QVERIFY(reset["weights_loaded_alike"].toBool());
    QCOMPARE(reset["loaded_steps"].toArray(), (QJsonArray{0.0}));
    QCOMPARE(reset["loaded_nonzero_moment_elements"].toInt(), 0);
    QCOMPARE(reset["steps_after"].toArray(), (QJsonArray{1.0}));
    QVERIFY2(reset["identical"].toBool(),
             ("max abs diff " + std::to_string(reset["max_abs_diff"].toDouble())).c_str());
  }

  // The dropped folder: torch 2.15 reads its new .metadata (ckptdoc's pickler), loads the model and
  // train_state equal to the input's, a fresh Adam steps both alike, and the full resume state no longer
  // loads.
  void fsdp2DropOptimizerLoadsTheModelUnderTorch() {
    REALDS_REQUIRE_DS(kLatest);
    test::TempDir dir;
    const auto in = realds::copy_of(realds::checkpoint("t215_fsdp2_ws2"), dir);
    const auto out = dir.file("dropped");
    const auto r = test::run_cli({"repair", in, "-o", out, "--drop-optimizer", "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(realds::parse(r.out)["keys_dropped"].toInt(), 70);

    const auto blind = judge_215("dcp_drop_check.py", {in, in}, dir, "input");
    QVERIFY2(!blind["keys_out_are_input_without_optimizer"].toBool() && blind["full_load_dropped"].toBool(),
             "the judge sees no optimizer in the input: it would pass anything");
    const auto t = judge_215("dcp_drop_check.py", {in, out}, dir, "dropped");
    QCOMPARE(t["keys_in"].toInt(), 77);
    QCOMPARE(t["keys_out"].toInt(), 7);
    QVERIFY(t["keys_out_are_input_without_optimizer"].toBool());
    QVERIFY(t["weights_identical"].toBool());
    QVERIFY(t["train_state_equal"].toBool());
    QVERIFY(t["fresh_step_identical"].toBool());
    QVERIFY(t["full_load_input"].toBool());
    QVERIFY(!t["full_load_dropped"].toBool());
  }

  // Each storage variant: diagnose reads every element and sees the planted NaN; export equals torch 2.15's
  // own whole reading (run.json says which torch could make), else the state dict the save was given.
  void storageVariantsReadWholeAndExportEqual_data() {
    QTest::addColumn<QString>("entry");
    QTest::addColumn<QString>(
        "reference");  // ref/ file; its run.json key must say "ok" unless saved_state_dict
    QTest::newRow("safetensors world 1") << "t215_dcp_safetensors_ws1"
                                         << "saved_state_dict.pt";
    QTest::newRow("safetensors world 2") << "t215_dcp_safetensors_ws2"
                                         << "saved_state_dict.pt";
    QTest::newRow("zstd") << "t215_dcp_zstd_ws1"
                          << "dcp_to_torch_save.pt";
    QTest::newRow("hf storage writer") << "t215_dcp_hf_writer_ws1"
                                       << "hf_torch_save.pt";
  }
  void storageVariantsReadWholeAndExportEqual() {
    QFETCH(QString, entry);
    QFETCH(QString, reference);
    REALDS_REQUIRE_DS(kLatest);
    const auto e = realds::checkpoint(entry.toStdString());
    const auto run = realds::parse(test::read_text(entry_dir(e) + "/run.json"));
    expect_written_by_torch_215(run);
    if (reference != "saved_state_dict.pt")
      QCOMPARE(run[QString(reference).remove(".pt")].toString(), QString("ok"));
    else if (e.world == 1)  // torch's FileSystemReader torch.loads the safetensors part: it cannot read it
      QVERIFY2(run["dcp_to_torch_save"].toString().startsWith("CheckpointException"),
               QJsonDocument(run).toJson().constData());

    const bool hf = entry.contains("hf_writer");
    const auto report = realds::diagnose_json(e.save_dir, 1);
    if (hf) {  // read as a Hugging Face weights folder
      QVERIFY(realds::has_code(report, "error", "nonfinite-values"));
    } else {
      // what was checksummed, said as it is: zstd items are torch.save zips (4 CRC-32s checked), a
      // safetensors-serialized file holds none (main said "each item's zip CRC-32 was checked" there too)
      const auto not_checked = QJsonDocument(report["verdict"].toObject()["not_checked"].toArray()).toJson();
      QVERIFY2(not_checked.contains(entry.contains("zstd") ? "(the zip CRC-32s of 4 items were checked)"
                                                           : "(and no item is a zip with CRC-32s)"),
               not_checked.constData());
      QCOMPARE(report["elements_read"].toInt(), 186);
      int nan = -1;
      for (const auto& t : report["tensors"].toArray())
        if (t.toObject()["key"].toString() == "model.0.weight") nan = t.toObject()["nan"].toInt();
      QCOMPARE(nan, 1);
    }
    for (const char* output : {"out.safetensors", "out.pt"}) {
      const auto verdict = export_compared_by_torch_215(
          e.save_dir, output, entry_dir(e) + "/ref/" + reference.toStdString(), false, hf);
      QVERIFY2(verdict["ok"].toBool() && verdict["tensors"].toInt() == 4,
               QJsonDocument(verdict).toJson().constData());
      QCOMPARE(verdict["bytes"].toInt(), (96 + 12 + 60) * 4 + 18 * 2);
    }
  }
};

QTEST_GUILESS_MAIN(TestRealdsDcpTorchLatest)
#include "test_realds_dcp_torch_latest.moc"
