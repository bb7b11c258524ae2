// The ImGui view driven like a user on a private Xvfb (Mesa llvmpipe): its --script clicks through ImGui's
// own input. A broken real checkpoint opens, Fix is clicked, the plan appears, Repair is clicked; the view
// reports the output verified, and `ckptdoc diagnose` (another process) calls it clean. A checkpoint compared
// with a copy whose fp32 masters were overwritten shows in the Diff tab the rows and numbers of
// `ckptdoc diff --json` on the same pair. Also: a failed open is reported, a dropped folder opens and lands
// in the recent list. Without a click, `ckptdoc demo` opens with the layout shaded by its worst finding's
// metric under a legend naming it, and the worst param selected; a healthy checkpoint keeps the param
// colours.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "imgui_driver.h"
#include "same_tree.h"
#include "storage_expectations.h"

using namespace ckptdoc;

namespace {

std::vector<std::string> errorCodes(const std::string& json) {
  std::vector<std::string> out;
  const auto doc = QJsonDocument::fromJson(QByteArray::fromStdString(json));
  for (const auto& f : doc.object()["findings"].toArray())
    if (f.toObject()["severity"].toString() == "error")
      out.push_back(f.toObject()["code"].toString().toStdString());
  return out;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at; (at = line.find(sep, start)) != std::string::npos; start = at + 1)
    out.push_back(line.substr(start, at - start));
  out.push_back(line.substr(start));
  return out;
}

// The Diff tab's rows as the script saved them: each a map of column -> cell text.
std::vector<std::map<std::string, std::string>> diffRows(const std::string& tsv) {
  std::vector<std::map<std::string, std::string>> rows;
  std::vector<std::string> header;
  for (const auto& line : split(tsv, '\n')) {
    if (line.empty()) continue;
    const auto cells = split(line, '\t');
    if (header.empty()) {
      header = cells;
      continue;
    }
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

// The panel prints 4 significant digits: agree with the CLI's full number to that.
bool sameNumber(const std::string& shown, double cli) {
  const double x = std::stod(shown);
  return std::fabs(x - cli) <= 5.001e-4 * std::fabs(cli) + 1e-300;
}

// The end of a script that runs a window's job (`click WHAT.run`) with its first write held, presses the
// window's Cancel and expects its outcome to say `words`; `ended` is the wait for the job's end ("repaired").
std::string cancelAtFirstWrite(const std::string& what, const std::string& ended, const std::string& words) {
  return "hold-write 1\nclick " + what + ".run\nwait held 120\nframes 3\nclick " + what +
         ".cancel\nrelease-write\nwait " + ended + " 120\nexpect " + what + "-message " + words + "\nquit\n";
}

// The first entry of `dir` whose name starts with `name` (an output or its partial folder), or "".
std::string leftOver(const test::TempDir& dir, const std::string& name) {
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().rfind(name, 0) == 0) return e.path().string();
  return {};
}

}  // namespace

class TestImguiScripted : public QObject {
  Q_OBJECT
 private slots:
  void init() {
    x_ = std::make_unique<Xvfb>();
    const std::string why = x_->start();
    if (!why.empty() && qgetenv("CKPTDOC_REQUIRE_XVFB") == "1")
      QFAIL(("CKPTDOC_REQUIRE_XVFB=1 but " + why).c_str());
    if (!why.empty()) QSKIP(why.c_str());
  }
  void cleanup() { x_.reset(); }

  void fixRepairsAndDiagnoseCallsTheOutputClean() {
    test::TempDir dir;
    const std::string broken = test::make_stale_masters_checkpoint(dir);
    const std::string out = dir.file("fixed");
    const std::string shot = dir.file("fixed.png");
    const auto r = runScript(*x_, dir, broken,
                             "wait analysed 300\n"
                             "expect finding fp32-master-mismatch\n"
                             "click fix:fp32-master-mismatch\n"
                             "wait plan 120\n"
                             "set repair.output " +
                                 out +
                                 "\n"
                                 "frames 2\n"
                                 "wait plan 120\n"
                                 "click repair.run\n"
                                 "wait repaired 600\n"
                                 "expect repaired-clean\n"
                                 "frames 2\n"
                                 "screenshot " +
                                 shot +
                                 "\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(QString::fromStdString(r.err).contains("expect repaired-clean: ok"));
    QVERIFY(std::filesystem::file_size(shot) > 1000);
    // Another process's diagnosis of what the click wrote.
    const auto fixed = test::run_cli({"diagnose", out, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(fixed, 0);
    QVERIFY(errorCodes(fixed.out).empty());
    // The input is as it was: still broken.
    const auto still = test::run_cli({"diagnose", broken, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(still, 1);
    QCOMPARE(errorCodes(still.out), std::vector<std::string>{"fp32-master-mismatch"});
  }

  // A PyTorch DCP folder torch wrote (tests/fixtures/dcp/fsdp2_ws2), copied without one of its .distcp files:
  // the Storage tab draws every file the CLI's inspect names with the items it places there (key, offset,
  // length), and the Overview the findings of `diagnose --json`, dcp-file-missing among them.
  void storageTabShowsTheDcpMapAndFindingsOfTheCli() {
    test::TempDir dir;
    const std::string copy = dir.file("fsdp2_ws2");
    test::copy_tree(test::fixtures_dir() + "/dcp/fsdp2_ws2", copy);
    std::filesystem::remove(copy + "/__1_0.distcp");
    const std::string storage = dir.file("storage.tsv"), findings = dir.file("findings.tsv");
    const std::string shot = dir.file("storage.png");
    const auto r = runScript(*x_, dir, copy,
                             "wait analysed 120\n"
                             "expect finding dcp-file-missing\n"
                             "tab storage\n"
                             "frames 3\n"
                             "save-storage " +
                                 storage +
                                 "\n"
                                 "save-findings " +
                                 findings +
                                 "\n"
                                 "screenshot " +
                                 shot +
                                 "\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(std::filesystem::file_size(shot) > 1000);
    int exit = -1;
    const auto cli = test::cli_storage(copy, &exit);
    QCOMPARE(exit, 1);
    QCOMPARE(cli.files.size(), size_t{2});
    const auto shown = test::imgui_storage(storage, findings);
    const std::string diff = test::storage_difference(cli, shown);
    QVERIFY2(diff.empty(), diff.c_str());
  }

  // The Overview's summary says what the files record: the ZeRO stage and DeepSpeed version the real engine
  // reported when it saved each fixture (engine_truth.json, written in the training run) and the tag.
  void overviewSaysWhatTheFilesRecord() {
    for (const char* name : {"zero2_fp16_ws2", "zero3_fp16_ws2"}) {
      test::TempDir dir;
      const std::string rows = dir.file("summary.tsv");
      const auto r = runScript(*x_, dir, test::healthy_fixture(name),
                               "wait opened 120\n"
                               "tab overview\n"
                               "frames 3\n"
                               "save-summary " +
                                   rows + "\nquit\n");
      CKPTDOC_EXPECT_EXIT(r, 0);
      std::map<std::string, std::string> shown;
      for (const QString& line :
           QString::fromStdString(test::read_text(rows)).split('\n', Qt::SkipEmptyParts)) {
        const auto cells = line.split('\t');
        if (cells.size() == 2) shown[cells[0].toStdString()] = cells[1].toStdString();
      }
      QFile truthFile(QString::fromStdString(test::deepspeed_fixture(name) + "/engine_truth.json"));
      QVERIFY2(truthFile.open(QIODevice::ReadOnly), name);
      const QJsonObject truth = QJsonDocument::fromJson(truthFile.readAll()).object();
      const std::string stage = "ZeRO stage " + std::to_string(truth["zero_stage"].toInt());
      QCOMPARE(QString::fromStdString(shown["Tag"]), truth["tag"].toString());
      QVERIFY2(
          shown["Optimizer"].find(stage + " (") != std::string::npos || shown["Optimizer"].ends_with(stage),
          (std::string(name) + ": " + shown["Optimizer"]).c_str());
      QCOMPARE(QString::fromStdString(shown["DeepSpeed"]),
               truth["versions"].toObject()["deepspeed"].toString());
    }
  }

  // Checkpoint > Repair... with no finding: the actions are ticked by hand, the plan names both, and the
  // output diagnoses clean in another process.
  void repairMenuRunsTheTickedActions() {
    test::TempDir dir;
    const std::string broken = test::make_stale_masters_checkpoint(dir);
    const std::string out = dir.file("fixed");
    const auto r = runScript(*x_, dir, broken,
                             "wait analysed 300\n"
                             "click menu.checkpoint\n"
                             "click menu.repair\n"
                             "set repair.output " +
                                 out +
                                 "\n"
                                 "click repair.reset-optimizer\n"
                                 "frames 2\n"
                                 "wait plan 120\n"
                                 "expect plan fp32-master-mismatch\n"
                                 "click repair.refresh-fp32\n"
                                 "frames 2\n"
                                 "wait plan 120\n"
                                 "expect plan refresh fp32 masters\n"
                                 "expect plan reset the optimizer\n"
                                 "click repair.run\n"
                                 "wait repaired 600\n"
                                 "expect repaired-clean\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto fixed = test::run_cli({"diagnose", out, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(fixed, 0);
    QVERIFY(errorCodes(fixed.out).empty());
  }

  // Checkpoint > Convert to universal... writes a folder another process reads as a universal checkpoint.
  void convertMenuWritesAUniversalFolder() {
    test::TempDir dir;
    const std::string out = dir.file("converted");
    const auto r = runScript(*x_, dir, test::healthy_fixture("zero2_fp16_ws2"),
                             "wait analysed 300\n"
                             "click menu.checkpoint\n"
                             "click menu.convert\n"
                             "set convert.output " +
                                 out +
                                 "\n"
                                 "frames 2\n"
                                 "click convert.run\n"
                                 "wait converted 600\n"
                                 "expect converted-verified\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto inspect = test::run_cli({"inspect", out, "--json"});
    CKPTDOC_EXPECT_EXIT(inspect, 0);
    QCOMPARE(QJsonDocument::fromJson(QByteArray::fromStdString(inspect.out)).object()["kind"].toString(),
             QStringLiteral("deepspeed-universal"));
  }

  // The convert window's Cancel while the universal folder is written (its first write held): it says what
  // the Qt dialog says, and nothing is left at or beside the output's path.
  void convertCancelledWritesNothing() {
    test::TempDir dir;
    const auto r =
        runScript(*x_, dir, test::healthy_fixture("zero2_fp16_ws2"),
                  "wait analysed 300\n"
                  "click menu.checkpoint\n"
                  "click menu.convert\n"
                  "set convert.output " +
                      dir.file("converted") +
                      "\n"
                      "frames 2\n" +
                      cancelAtFirstWrite("convert", "converted", "Convert cancelled; nothing was written."));
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(leftOver(dir, "converted"), std::string());
  }

  // The repair window's Cancel while the repaired copy is written (its first write held): it says what every
  // view says of a cancelled repair, and no output or partial folder is left.
  void repairCancelledWritesNothing() {
    test::TempDir dir;
    const auto r =
        runScript(*x_, dir, test::make_stale_masters_checkpoint(dir),
                  "wait analysed 300\n"
                  "click fix:fp32-master-mismatch\n"
                  "wait plan 120\n"
                  "set repair.output " +
                      dir.file("fixed") +
                      "\n"
                      "frames 2\n"
                      "wait plan 120\n" +
                      cancelAtFirstWrite("repair", "repaired", "Repair cancelled; nothing was written."));
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(leftOver(dir, "fixed"), std::string());
  }

  // ZeRO-3 against 16-bit weights saved elsewhere (the app's diagnose --lp-source): a save with one tensor
  // scaled is named by lp-source-mismatch, which the analysis without it does not show.
  void zero3ComparedWithSixteenBitWeightsSavedElsewhere() {
    test::TempDir dir;
    const std::string fixture = test::deepspeed_fixture("zero3_fp16_ws2");
    const std::string stale = dir.file("stale.bin");
    const auto py = test::run_python(test::script("fixtures/recast_state_dict.py"),
                                     {fixture + "/checkpoint.zero_to_fp32.bin", stale, "--dtype", "float16",
                                      "--scale", "fc2.weight=1.01"});
    QVERIFY2(py.exit_code == 0, py.err.c_str());
    const auto r = runScript(*x_, dir, fixture + "/checkpoint",
                             "wait analysed 300\n"
                             "expect no-finding lp-source-mismatch\n"
                             "lp-source " +
                                 stale +
                                 "\n"
                                 "wait analysed 300\n"
                                 "expect finding lp-source-mismatch\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
  }

  void failedOpenIsReportedAndADroppedFolderOpens() {
    test::TempDir dir;
    const std::string healthy = test::healthy_fixture("zero1_fp16_ws2");
    const auto r = runScript(*x_, dir, "",
                             "open " + dir.file("no-such-checkpoint") +
                                 "\n"
                                 "frames 20\n"
                                 "expect open-failed\n"
                                 "drop " +
                                 healthy +
                                 "\n"
                                 "wait analysed 300\n"
                                 "expect no-finding fp32-master-mismatch\n"
                                 "tab layout\n"
                                 "shade exact\n"
                                 "select fc1.weight\n"
                                 "frames 3\n"
                                 "tab params\n"
                                 "wait density 120\n"
                                 "frames 2\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    const std::string recent = test::read_text(dir.file("config/ckptdoc/imgui-recent"));
    QVERIFY2(recent.rfind(std::filesystem::path(healthy).lexically_normal().string() + "\n", 0) == 0,
             recent.c_str());
  }

  // With names as long as Hugging Face's (BART's cross-attention), the last column still sits inside the
  // table at the size the app opens at: the names are cut in the middle, not the numbers pushed out.
  void diffTableKeepsTheLastColumnInView() {
    test::TempDir dir;
    const std::string file = test::make_long_names_weights(dir);
    const auto r = runScript(*x_, dir, file,
                             "wait opened 300\n"
                             "compare " +
                                 file +
                                 "\n"
                                 "wait diffed 300\n"
                                 "tab diff\n"
                                 "frames 3\n"
                                 "expect diff-rows 6\n"
                                 "expect inside diff.col.close diff.table\n"
                                 "expect inside diff.col.tensor diff.table\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
  }

  void diffTabShowsWhatTheCliDiffReports() {
    test::TempDir dir;
    const std::string a = test::healthy_fixture("zero2_fp16_ws2");
    const std::string b = test::make_stale_masters_checkpoint(dir);  // every fp32 master overwritten
    const std::string rows_file = dir.file("diff.tsv");
    const auto cli = test::run_cli({"diff", a, b, "--what", "fp32", "--json"});
    QCOMPARE(cli.exit_code, 1);  // different
    const auto doc = QJsonDocument::fromJson(QByteArray::fromStdString(cli.out)).object();
    QVERIFY(doc["removed"].toArray().isEmpty() && doc["added"].toArray().isEmpty() &&
            doc["shape_changed"].toArray().isEmpty());
    const auto tensors = doc["tensors"].toArray();
    QVERIFY(tensors.size() > 1);

    const auto r =
        runScript(*x_, dir, a,
                  "wait opened 300\n"
                  "compare " +
                      b +
                      "\n"
                      "wait diffed 300\n"
                      "tab diff\n"
                      "frames 3\n"
                      "expect diff-rows " +
                      std::to_string(tensors.size()) +
                      "\n"
                      "save-diff " +
                      rows_file +
                      "\n"
                      "screenshot " +
                      dir.file("diff.png") +
                      "\n"
                      // A click on a header sorts by it (largest difference first), a second click
                      // reverses, a third returns to core's order.
                      "click diff.col.max_abs\nframes 2\nsave-diff " +
                      dir.file("by_max_desc.tsv") + "\nclick diff.col.max_abs\nframes 2\nsave-diff " +
                      dir.file("by_max_asc.tsv") + "\nclick diff.col.max_abs\nframes 2\nsave-diff " +
                      dir.file("unsorted.tsv") +
                      "\n"
                      "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto rows = diffRows(test::read_text(rows_file));
    const auto max_of = [](const std::map<std::string, std::string>& row) {
      return std::stod(row.at("max_abs"));
    };
    const auto desc = diffRows(test::read_text(dir.file("by_max_desc.tsv")));
    const auto asc = diffRows(test::read_text(dir.file("by_max_asc.tsv")));
    QCOMPARE(desc.size(), rows.size());
    QCOMPARE(asc.size(), rows.size());
    for (size_t i = 1; i < desc.size(); ++i) {
      QVERIFY2(max_of(desc[i - 1]) >= max_of(desc[i]),
               (desc[i - 1].at("name") + " before " + desc[i].at("name")).c_str());
      QVERIFY2(max_of(asc[i - 1]) <= max_of(asc[i]),
               (asc[i - 1].at("name") + " before " + asc[i].at("name")).c_str());
    }
    QVERIFY(max_of(desc.front()) > max_of(desc.back()));  // the order is not trivially the same
    QCOMPARE(test::read_text(dir.file("unsorted.tsv")), test::read_text(rows_file));
    QCOMPARE(rows.size(), static_cast<size_t>(tensors.size()));
    int changed = 0;
    for (qsizetype i = 0; i < tensors.size(); ++i) {  // same order: worst first, as core ordered them
      const auto t = tensors[i].toObject();
      const auto& row = rows[static_cast<size_t>(i)];
      const std::string name = t["name"].toString().toStdString();
      QCOMPARE(row.at("name"), name);
      QCOMPARE(row.at("status"), std::string(t["equal"].toBool() ? "equal" : "changed"));
      QCOMPARE(row.at("numel"), std::to_string(t["numel"].toInteger()));
      QVERIFY2(sameNumber(row.at("max_abs"), t["max_abs_diff"].toDouble()),
               (name + " " + row.at("max_abs")).c_str());
      QVERIFY2(sameNumber(row.at("rel_l2"), t["rel_l2"].toDouble()), (name + " " + row.at("rel_l2")).c_str());
      changed += t["equal"].toBool() ? 0 : 1;
    }
    QVERIFY(changed > 0);  // the overwritten masters
    QVERIFY(std::filesystem::file_size(dir.file("diff.png")) > 1000);
  }

  void demoOpensShadedByItsWorstFinding() {
    test::TempDir dir;
    CKPTDOC_EXPECT_EXIT(test::run_cli({"demo", dir.file("demo")}), 0);
    const auto r = runScript(*x_, dir, dir.file("demo"),
                             "wait analysed 300\n"
                             "expect finding fp32-master-mismatch\n"
                             "frames 2\n"
                             "expect selected\n"
                             "tab layout\n"
                             "frames 3\n"
                             "expect shade exact\n"
                             "expect legend Exact fraction\n"
                             "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(QString::fromStdString(r.err).contains("expect legend Exact fraction: ok"), r.err.c_str());
  }

  void healthyCheckpointKeepsParamShading() {
    test::TempDir dir;
    const auto r = runScript(*x_, dir, test::healthy_fixture("zero1_fp16_ws2"),
                             "wait analysed 300\n"
                             "expect no-finding fp32-master-mismatch\n"
                             "tab layout\n"
                             "frames 3\n"
                             "expect shade param\n"
                             "expect legend Param\n"
                             "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(QString::fromStdString(r.err).contains("expect legend Param: ok"), r.err.c_str());
  }

  // Weights holding NaN (written by torch) exported from the window: the success line comes with the warning.
  void exportOfNaNWeightsWarns() {
    test::TempDir dir;
    const auto made =
        test::run_python(test::script("fixtures/make_hf_folder.py"), {dir.file("m"), "--break", "nan"});
    CKPTDOC_EXPECT_EXIT(made, 0);
    const auto r = runScript(*x_, dir, dir.file("m"),
                             "wait analysed 300\n"
                             "click export\n"
                             "frames 2\n"
                             "set export.path " +
                                 dir.file("out.safetensors") +
                                 "\n"
                                 "click export.run\n"
                                 "wait exported 300\n"
                                 "frames 2\n"
                                 "expect export-warning holds NaN or Inf values\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(std::filesystem::exists(dir.file("out.safetensors")));
  }

  // A PyTorch DCP folder (tests/fixtures/dcp/fsdp2_ws2) exported from the window in shards: the files are
  // those `ckptdoc export` writes (judged against torch's dcp_to_torch_save in test_dcp_export), byte for
  // byte.
  void dcpFolderExportsWhatTheCliExports() {
    test::TempDir dir;
    const std::string dcp = test::fixtures_dir() + "/dcp/fsdp2_ws2";
    const std::string ours = dir.file("app-hf"), cli = dir.file("cli-hf");
    const auto r = runScript(*x_, dir, dcp,
                             "wait analysed 120\n"
                             "click export\n"
                             "frames 2\n"
                             "set export.shards 2KB\n"
                             "set export.path " +
                                 ours +
                                 "\n"
                                 "click export.run\n"
                                 "wait exported 300\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", dcp, "-o", cli, "--max-shard-size", "2KB"}), 0);
    QVERIFY(test::files_in(cli).size() > 2);  // shards and their index
    test::expect_same_tree(ours, cli);
  }

  // The same export held at its second shard's write (one tensor a shard): the window's bar is part way, its
  // Cancel stops the export, which says so, and nothing is left beside the output's path.
  void dcpFolderExportShowsProgressAndCancels() {
    test::TempDir dir;
    const std::string dcp = test::fixtures_dir() + "/dcp/fsdp2_ws2";
    const auto r = runScript(*x_, dir, dcp,
                             "wait analysed 120\n"
                             "click export\n"
                             "frames 2\n"
                             "set export.shards 1\n"
                             "set export.path " +
                                 dir.file("hf") +
                                 "\n"
                                 "hold-write 2\n"
                                 "click export.run\n"
                                 "wait held 120\n"
                                 "frames 3\n"
                                 "expect export-progress\n"
                                 "click export.cancel\n"
                                 "release-write\n"
                                 "wait exported 120\n"
                                 "expect export-message Export cancelled; nothing was written.\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(QString::fromStdString(r.err).contains("expect export-progress: ok"), r.err.c_str());
    for (const auto& f : test::files_in(dir.path()))  // no output, partial folder or temp file beside it
      QVERIFY2(f.rfind("hf", 0) != 0, f.c_str());
  }

  // A reset of lost moments held part way through copying the folder: the repair window's bar is part way,
  // Cancel stops it, and no output or partial folder is left.
  void dcpRepairShowsProgressAndCancels() {
    test::TempDir dir;
    const std::string in = test::fixtures_dir() + "/dcp/fsdp2_ws2_moments_lost";
    const auto r = runScript(*x_, dir, in,
                             "wait analysed 120\n"
                             "click fix:dcp-moments-lost\n"
                             "frames 2\n"
                             "set repair.output " +
                                 dir.file("fixed") +
                                 "\n"
                                 "hold-write 2\n"
                                 "click repair.run\n"
                                 "wait held 120\n"
                                 "frames 3\n"
                                 "expect repair-progress\n"
                                 "click repair.cancel\n"
                                 "release-write\n"
                                 "wait repaired 120\n"
                                 "expect repair-message Repair cancelled; nothing was written.\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(QString::fromStdString(r.err).contains("expect repair-progress: ok"), r.err.c_str());
    for (const auto& f : test::files_in(dir.path()))  // no output, no partial folder
      QVERIFY2(f.rfind("fixed", 0) != 0, f.c_str());
  }

  // An FSDP2 save whose Adam moments were lost (written by torch, tests/fixtures/dcp/README.md), fixed from
  // the Overview: the finding's Fix opens the source's repair with the reset ticked, and Repair writes what
  // `ckptdoc repair --reset-optimizer` writes (judged by torch in test_realds_dcp_reset), byte for byte.
  void dcpMomentsLostAreResetByTheirFix() {
    test::TempDir dir;
    const std::string in = test::fixtures_dir() + "/dcp/fsdp2_ws2_moments_lost";
    const std::string ours = dir.file("app-fixed"), cli = dir.file("cli-fixed");
    const auto r = runScript(*x_, dir, in,
                             "wait analysed 120\n"
                             "expect finding dcp-moments-lost\n"
                             "click fix:dcp-moments-lost\n"
                             "frames 2\n"
                             "set repair.output " +
                                 ours +
                                 "\n"
                                 "click repair.run\n"
                                 "wait repaired 300\n"
                                 "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", in, "-o", cli, "--reset-optimizer"}), 0);
    QVERIFY(test::files_in(cli).size() > 2);
    test::expect_same_tree(ours, cli);
  }

  // The same folder's repair window, opened as a Refresh fp32 Fix would open it: the refresh is off with the
  // source's reason (a DCP folder holds no fp32 masters), the reset and the drop offered. main offered the
  // refresh and refused it only once Repair was pressed.
  void dcpRefreshIsOffBeforeRepair() {
    test::TempDir dir;
    const auto r = runScript(*x_, dir, test::fixtures_dir() + "/dcp/fsdp2_ws2_moments_lost",
                             "wait analysed 120\n"
                             "fix refresh-fp32\n"
                             "frames 2\n"
                             "expect repair-refused refresh-fp32 holds no fp32 master copy of its weights\n"
                             "expect repair-offered reset-optimizer\n"
                             "expect repair-offered drop-optimizer\n"
                             "quit\n");
    CKPTDOC_EXPECT_EXIT(r, 0);
  }

  void aScriptThatCannotFinishFails() {
    test::TempDir dir;
    const auto r = runScript(*x_, dir, test::healthy_fixture("zero1_fp16_ws2"),
                             "wait analysed 300\nexpect finding fp32-master-mismatch\nquit\n");
    CKPTDOC_EXPECT_EXIT(r, 3);
    QVERIFY(QString::fromStdString(r.err).contains("no finding fp32-master-mismatch"));
  }

 private:
  std::unique_ptr<Xvfb> x_;
};

CKPTDOC_TEST_MAIN_WIDGETS(TestImguiScripted)
#include "test_imgui_scripted.moc"
