// Hugging Face model folders and weights files as inputs, as a user runs ckptdoc on them: folders written by
// torch 1.13 (.bin shards) or a spec-only safetensors writer (tests/fixtures/make_hf_folder.py), healthy and
// broken each way a real folder breaks. Every finding must come from the folder broken that way, name the
// file and the tensors, and nothing else may be reported; inspect, export and re-sharding read the same
// tensors torch reads.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

struct FolderSpec {
  std::string out, format, kind, dtype = "bfloat16";
};

// Every folder by one make_hf_folder.py run (its --then), each folder's expectations in order.
std::vector<QJsonObject> make_folders(const std::vector<FolderSpec>& specs) {
  std::vector<std::string> args;
  for (const auto& s : specs) {
    if (!args.empty()) args.push_back("--then");
    args.insert(args.end(), {s.out, "--format", s.format, "--break", s.kind, "--dtype", s.dtype});
  }
  const auto r = test::run_python(test::script("fixtures/make_hf_folder.py"), args);
  if (r.exit_code != 0) throw std::runtime_error("make_hf_folder.py failed: " + r.err);
  std::vector<QJsonObject> out;
  for (const auto& line : QByteArray::fromStdString(r.out).split('\n'))
    if (!line.trimmed().isEmpty()) out.push_back(QJsonDocument::fromJson(line).object());
  if (out.size() != specs.size()) throw std::runtime_error("make_hf_folder.py printed " + r.out);
  return out;
}

QJsonObject make_folder(const std::string& out, const std::string& format, const std::string& kind,
                        const std::string& dtype = "bfloat16") {
  return make_folders({{out, format, kind, dtype}}).front();
}

struct BrokenRow {
  const char *format, *kind, *code, *severity;
  int exit;
};

std::vector<BrokenRow> broken_rows() {
  std::vector<BrokenRow> rows;
  for (const char* format : {"safetensors", "bin"}) {
    auto row = [&](const char* kind, const char* code, const char* severity, int exit) {
      rows.push_back({format, kind, code, severity, exit});
    };
    row("none", "", "", 0);
    row("missing-shard", "index-shard-missing", "error", 1);
    row("index-extra", "index-tensor-missing", "error", 1);
    row("unindexed", "shard-tensor-unindexed", "warning", 0);
    row("duplicate", "tensor-duplicated", "error", 1);
    row("total-size", "index-total-mismatch", "warning", 0);
    row("placeholder", "placeholder-tensor", "error", 1);
    row("nan", "nonfinite-values", "error", 1);
    row("zeros", "all-zero-weights", "warning", 0);
    row("mixed-dtypes", "mixed-dtypes", "warning", 0);
    row("stray-shard", "shard-unindexed", "warning", 0);
    row("truncated", "shard-unreadable", "error", 1);
    row("no-index", "index-missing", "error", 1);
  }
  return rows;
}

QJsonObject json_of(const test::RunResult& r) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

}  // namespace

class TestWeightsFolders : public QObject {
  Q_OBJECT
  std::unique_ptr<test::TempDir> broken_;             // brokenFolders' folders, one per row
  std::map<std::string, QJsonObject> broken_expect_;  // and their expectations, by folder

 private slots:
  void brokenFolders_data() {
    QTest::addColumn<QString>("format");
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("code");
    QTest::addColumn<QString>("severity");
    QTest::addColumn<int>("exit");
    for (const auto& r : broken_rows())
      QTest::newRow((std::string(r.format) + " " + r.kind).c_str())
          << r.format << r.kind << r.code << r.severity << r.exit;
  }
  void brokenFolders() {
    QFETCH(QString, format);
    QFETCH(QString, kind);
    QFETCH(QString, code);
    QFETCH(QString, severity);
    QFETCH(int, exit);
    // Every row's folder is made by one generator run when the first row needs them, each in its own folder.
    if (!broken_) {
      broken_ = std::make_unique<test::TempDir>();
      std::vector<FolderSpec> specs;
      for (const auto& r : broken_rows())
        specs.push_back({broken_->file(std::string(r.format) + "-" + r.kind), r.format, r.kind});
      const auto expects = make_folders(specs);
      for (size_t i = 0; i < specs.size(); ++i) broken_expect_[specs[i].out] = expects[i];
    }
    const std::string dir = broken_->file(format.toStdString() + "-" + kind.toStdString());
    const auto expect = broken_expect_.at(dir);
    const auto r = test::run_cli({"diagnose", dir, "--json"});
    CKPTDOC_EXPECT_EXIT(r, exit);
    const auto findings = json_of(r)["findings"].toArray();
    if (code.isEmpty()) {
      QVERIFY2(findings.isEmpty(), r.out.c_str());
      return;
    }
    QCOMPARE(findings.size(), 1);  // exactly the damage, nothing else
    const auto f = findings[0].toObject();
    QCOMPARE(f["code"].toString(), code);
    QCOMPARE(f["severity"].toString(), severity);
    const std::string message = f["message"].toString().toStdString();
    if (!expect["broken_file"].isNull())
      QVERIFY2(message.find(expect["broken_file"].toString().toStdString()) != std::string::npos,
               message.c_str());
    std::set<std::string> params;
    for (const auto& p : f["params"].toArray()) params.insert(p.toString().toStdString());
    for (const auto& t : expect["broken_tensors"].toArray()) {
      QVERIFY2(params.count(t.toString().toStdString()),
               (t.toString().toStdString() + " not in " + r.out).c_str());
      QVERIFY2(message.find(t.toString().toStdString()) != std::string::npos || params.size() > 5,
               message.c_str());
    }
    // inspect lists the same problem without reading tensor bytes (value findings need the scan).
    if (code != "nonfinite-values" && code != "all-zero-weights") {
      const auto i = test::run_cli({"inspect", dir, "--json"});
      CKPTDOC_EXPECT_EXIT(i, 0);
      QVERIFY2(i.out.find(code.toStdString()) != std::string::npos, i.out.c_str());
    }
  }

  // inspect maps every tensor to the file the index names, with torch's dtypes and shapes.
  void inspectHealthyFolder_data() {
    QTest::addColumn<QString>("format");
    QTest::newRow("safetensors") << "safetensors";
    QTest::newRow("bin") << "bin";
  }
  void inspectHealthyFolder() {
    QFETCH(QString, format);
    test::TempDir tmp;
    const auto expect = make_folder(tmp.file("m"), format.toStdString(), "none");
    const auto r = test::run_cli({"inspect", tmp.file("m"), "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const auto j = json_of(r);
    QCOMPARE(j["kind"].toString(), QString("hf-folder"));
    QCOMPARE(j["dtype"].toString(), QString("bfloat16"));
    QCOMPARE(j["config"].toObject()["hidden_size"].toInt(), 16);
    const auto want = expect["tensors"].toObject();
    const auto tensors = j["tensors"].toArray();
    QCOMPARE(tensors.size(), want.size());
    for (const auto& t : tensors) {
      const auto o = t.toObject();
      QCOMPARE(o["file"].toString(), want[o["name"].toString()].toString());
    }
    QVERIFY(j["problems"].toArray().isEmpty());
    const auto text = test::run_cli({"inspect", tmp.file("m")});
    QVERIFY2(text.out.find("Hugging Face model folder") != std::string::npos, text.out.c_str());
  }

  // A folder (or one file of it) exported to one file and re-sharded: torch reads back exactly its tensors.
  void exportAndReshard() {
    test::TempDir tmp;
    make_folder(tmp.file("m"), "bin", "none", "float32");
    auto r = test::run_cli({"export", tmp.file("m"), "-o", tmp.file("one.safetensors")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const std::string compare = test::script("fixtures/compare_state_dicts.py");
    CKPTDOC_EXPECT_EXIT(
        test::run_python(compare, {tmp.file("one.safetensors"), tmp.file("m"), "--ignore-order"}), 0);
    r = test::run_cli(
        {"export", tmp.file("m"), "-o", tmp.file("re"), "--format", "torch", "--max-shard-size", "3KB"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(fs::exists(tmp.file("re/pytorch_model.bin.index.json")));
    CKPTDOC_EXPECT_EXIT(test::run_python(compare, {tmp.file("re"), tmp.file("m"), "--ignore-order"}), 0);
    r = test::run_cli(
        {"export", tmp.file("m"), "-o", tmp.file("bf"), "--dtype", "bfloat16", "--max-shard-size", "1GB"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    // The folder's config comes along (so from_pretrained loads the output), the weights in one file.
    QCOMPARE(test::files_in(tmp.file("bf")), (std::vector<std::string>{"config.json", "model.safetensors"}));
    QCOMPARE(test::read_text(tmp.file("bf/config.json")), test::read_text(tmp.file("m/config.json")));
    CKPTDOC_EXPECT_EXIT(test::run_python(compare, {tmp.file("bf/model.safetensors"), tmp.file("m"),
                                                   "--ignore-order", "--cast", "bfloat16"}),
                        0);
  }

  // One weights file on its own is a source too: inspect, diagnose and export it.
  void singleFile() {
    test::TempDir tmp;
    make_folder(tmp.file("m"), "safetensors", "nan");
    const std::string shard = tmp.file("m/model-00002-of-00003.safetensors");
    auto r = test::run_cli({"diagnose", shard, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    const auto f = json_of(r)["findings"].toArray();
    QCOMPARE(f.size(), 1);
    QCOMPARE(f[0].toObject()["code"].toString(), QString("nonfinite-values"));
    r = test::run_cli({"inspect", shard, "--json"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(json_of(r)["kind"].toString(), QString("weights-file"));
    QCOMPARE(json_of(r)["tensors"].toArray().size(), 8);
    r = test::run_cli({"export", shard, "-o", tmp.file("x.bin")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    CKPTDOC_EXPECT_EXIT(
        test::run_python(test::script("fixtures/compare_state_dicts.py"), {tmp.file("x.bin"), shard}), 0);
  }

  void notAWeightsFile() {
    test::TempDir tmp;
    test::write_text(tmp.file("notes.bin"), "hello, not weights");
    const auto r = test::run_cli({"inspect", tmp.file("notes.bin")});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("notes.bin") != std::string::npos && r.err.find("neither") != std::string::npos,
             r.err.c_str());
    fs::create_directories(tmp.file("empty"));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"inspect", tmp.file("empty")}), 2);
  }
};

CKPTDOC_TEST_MAIN(TestWeightsFolders)
#include "test_weights_folders.moc"
