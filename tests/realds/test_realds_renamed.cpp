// Rank files of real DeepSpeed checkpoints under names DeepSpeed does not use: recognised by their content,
// given their rank (ZeRO-1/2 and BF16_Optimizer: from param_slice_mappings, whatever the order of the names),
// read as the files they are, and each reported with the name load_checkpoint looks for. Before, inspect and
// diagnose said "no model-states or optimizer-states files in the tag folder".
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <map>
#include <set>

#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;
namespace fs = std::filesystem;

namespace {

QJsonObject run_json(const std::vector<std::string>& args, int want_exit) {
  const auto r = test::run_cli(args);
  if (r.exit_code != want_exit)
    throw std::runtime_error("exit " + std::to_string(r.exit_code) + " (wanted " + std::to_string(want_exit) +
                             "): " + r.out.substr(0, 3000) + r.err);
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

// file -> expected name, from the rank-file-renamed problems of `inspect --json`.
std::map<std::string, std::string> expected_names(const QJsonObject& inspect) {
  std::map<std::string, std::string> out;
  for (const auto& p : inspect["problems"].toArray()) {
    const auto o = p.toObject();
    if (o["code"].toString() != "rank-file-renamed") continue;
    const auto d = o["details"].toObject();
    out[d["file"].toString().toStdString()] = d["expected_name"].toString().toStdString();
  }
  return out;
}

// The per-param numbers of a diagnosis (what must not change when only names change).
std::map<QString, QString> param_numbers(const QJsonObject& report) {
  std::map<QString, QString> out;
  for (const auto& p : report["params"].toArray()) {
    auto o = p.toObject();
    o.remove("per_rank");
    out[o["name"].toString()] = QJsonDocument(o).toJson(QJsonDocument::Compact);
  }
  return out;
}

}  // namespace

class TestRealdsRenamed : public QObject {
  Q_OBJECT

 private slots:
  void renamedFilesAreReadAndNamed_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"z2_fp16_dp2", "z1_fp16_dp4_edge", "bf16opt_s1_dp2", "z3_fp16_dp2"})
      QTest::newRow(n) << QString(n);
  }
  void renamedFilesAreReadAndNamed() {
    REALDS_REQUIRE();
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    test::TempDir dir;
    const std::string ckpt = realds::copy_of(e, dir);
    const std::string tag = ckpt + "/" + e.tag;
    // Rename every rank file, in an order unrelated to the ranks (reverse) where the content records the
    // rank; ZeRO-3 files do not, so there the new names keep the ranks' order (which is what ckptdoc then
    // assumes).
    const bool ranks_recorded = e.stage != 3;
    std::vector<std::string> originals;
    for (const auto& f : fs::directory_iterator(tag)) originals.push_back(f.path().filename().string());
    std::sort(originals.begin(), originals.end());
    if (ranks_recorded) std::reverse(originals.begin(), originals.end());
    std::map<std::string, std::string> renamed;  // new name -> original name
    for (size_t i = 0; i < originals.size(); ++i) {
      const std::string to = "part" + std::to_string(i) + ".pt";
      fs::rename(tag + "/" + originals[i], tag + "/" + to);
      renamed[to] = originals[i];
    }
    const auto inspect = run_json({"inspect", ckpt, "--json"}, 0);
    const auto names = expected_names(inspect);
    std::set<std::string> expected, original;
    for (const auto& [now, was] : renamed) {
      QVERIFY2(names.count(now), (now + " not reported").c_str());
      QCOMPARE(names.at(now), was);
      expected.insert(names.at(now));
      original.insert(was);
    }
    QCOMPARE(expected, original);
    // Nothing but the names is wrong: the same numbers as the original, no other error.
    const auto report = run_json({"diagnose", ckpt, "--json", "--device", "cpu"}, 1);
    std::set<std::string> errors;
    for (const auto& c : realds::codes(report, "error")) errors.insert(c);
    QCOMPARE(errors, std::set<std::string>{"rank-file-renamed"});
    {
      const auto original = run_json({"diagnose", e.save_dir, "--json", "--device", "cpu"}, 0);
      QVERIFY(param_numbers(report) == param_numbers(original));
    }
  }

  // One renamed rank file given on its own is read as what it is.
  void oneRenamedFile() {
    REALDS_REQUIRE();
    const auto e = realds::checkpoint("z2_fp16_dp2");
    test::TempDir dir;
    const std::string ckpt = realds::copy_of(e, dir);
    const std::string tag = ckpt + "/" + e.tag;
    fs::rename(tag + "/zero_pp_rank_1_mp_rank_00_optim_states.pt", tag + "/rank-one.bin");
    const auto inspect = run_json({"inspect", tag + "/rank-one.bin", "--json"}, 0);
    QCOMPARE(expected_names(inspect).at("rank-one.bin"),
             std::string("zero_pp_rank_1_mp_rank_00_optim_states.pt"));
  }
};

CKPTDOC_TEST_MAIN(TestRealdsRenamed)
#include "test_realds_renamed.moc"
