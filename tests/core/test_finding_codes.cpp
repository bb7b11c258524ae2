// The one table of finding codes (model/finding_codes.h, #27): codes are unique and well formed, each is
// documented where its row says (README.md or docs/reference.md, read from the source tree), an unknown code
// fails loudly, what real checkpoints report is in the table, and no source file spells a finding code as a
// string literal outside the table (so a new code cannot skip it).
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding.h"
#include "ckptdoc/model/finding_codes.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

// GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'.
std::string anchor_of(std::string heading) {
  std::string out;
  for (char c : heading) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')
      out += c;
    else if (c == ' ')
      out += '-';
  }
  return out;
}

// The text of the section a heading anchor names, up to the next heading of the same or a higher level; empty
// when the file has no such heading.
std::string section(const std::string& markdown, const std::string& anchor) {
  std::istringstream in(markdown);
  std::string line, text;
  size_t level = 0;
  bool inside = false, fenced = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    const size_t hashes = fenced ? 0 : line.find_first_not_of('#');
    const bool heading = hashes > 0 && hashes != std::string::npos && line[hashes] == ' ';
    if (heading && inside && hashes <= level) break;
    if (heading && !inside && anchor_of(line.substr(hashes + 1)) == anchor) {
      inside = true;
      level = hashes;
      continue;
    }
    if (inside) text += line + "\n";
  }
  return text;
}

// Lines of core/src's C++ files (comments dropped) that spell a finding code as a string literal outside the
// table: a table code anywhere, or any code-shaped literal handed to problem(...)/add(...), a Finding or a
// Problem braced initialiser with a severity, or assigned to `.code`.
std::vector<std::string> literal_codes(const std::string& root) {
  std::set<std::string> names;
  for (const auto& row : model::all_codes()) names.insert(std::string(row.name));
  const std::regex literal(R"re("([a-z0-9]+(-[a-z0-9]+)+)")re");
  const std::regex shaped(
      R"re(((problem|add)\(\s*|Finding\s*\w*\s*\{\s*|\.code\s*=\s*|\{\s*)"[a-z0-9]+(-[a-z0-9]+)+"(\s*,\s*("(error|warning|info)"|[A-Za-z:]*Severity::))?)re");
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(root) / "core" / "src")) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
    if (e.path().filename() == "finding_codes.cpp") continue;
    std::ifstream f(e.path());
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
      ++n;
      const auto first = line.find_first_not_of(" \t");
      if (first != std::string::npos && line.compare(first, 2, "//") == 0) continue;
      const auto comment = line.find(" // ");
      const std::string code = comment == std::string::npos ? line : line.substr(0, comment);
      std::smatch m;
      bool hit = false;
      for (auto it = std::sregex_iterator(code.begin(), code.end(), literal); it != std::sregex_iterator();
           ++it)
        hit = hit || names.count((*it)[1].str()) > 0;
      if (std::regex_search(code, m, shaped) && (m[1].str()[0] != '{' || m[4].matched)) hit = true;
      if (hit) found.push_back(e.path().string() + ":" + std::to_string(n) + ": " + code);
    }
  }
  return found;
}

}  // namespace

class TestFindingCodes : public QObject {
  Q_OBJECT
 private slots:
  void codesAreUniqueAndWellFormed() {
    const auto codes = model::all_codes();
    QVERIFY(codes.size() > 100);
    std::set<std::string_view> seen;
    const std::regex shape("[a-z0-9]+(-[a-z0-9]+)+");
    for (size_t i = 0; i < codes.size(); ++i) {
      const auto& row = codes[i];
      const std::string name(row.name);
      QVERIFY2(seen.insert(row.name).second, ("code listed twice: " + name).c_str());
      QVERIFY2(std::regex_match(name, shape), ("not a code: '" + name + "'").c_str());
      QCOMPARE(static_cast<size_t>(row.code), i);
      QCOMPARE(model::code_name(row.code), name);
      QVERIFY(model::find_code(row.name) == row.code);
      QVERIFY(&model::info(row.code) == &row);
    }
  }

  // Each row's doc names a file and heading whose section mentions the code in backticks, as the README's
  // Diagnosis table does.
  void everyCodeIsDocumentedWhereItsRowSays() {
    std::map<std::string, std::string> files;
    for (const auto& row : model::all_codes()) {
      const std::string name(row.name), doc(row.doc);
      const auto hash = doc.find('#');
      QVERIFY2(hash != std::string::npos, (name + ": doc '" + doc + "' is not FILE#anchor").c_str());
      const std::string file = doc.substr(0, hash);
      QVERIFY2(file == "README.md" || file == "docs/reference.md", (name + ": doc in " + file).c_str());
      if (!files.count(file)) files[file] = test::read_text(test::source_dir() + "/" + file);
      const std::string text = section(files[file], doc.substr(hash + 1));
      QVERIFY2(!text.empty(), (name + ": no section " + doc).c_str());
      QVERIFY2(text.find("`" + name + "`") != std::string::npos,
               (name + ": not documented in " + doc + " (write it there in backticks)").c_str());
    }
  }

  void unknownCodeFailsLoudly() {
    QVERIFY(!model::find_code("no-such-code"));
    try {
      (void)model::code_of("no-such-code");
      QFAIL("code_of accepted an unknown code");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::InvalidRequest);
      QVERIFY2(std::string(e.what()).find("'no-such-code'") != std::string::npos, e.what());
    }
  }

  // One finding type (model/finding.h): made from a code, it takes the table's severity and repair, so a
  // catalog problem is a finding as it is (no copy decides them later).
  void findingTakesTheTablesSeverityAndRepair() {
    for (const auto& row : model::all_codes()) {
      const model::Finding f(row.code, "m", "f");
      QCOMPARE(f.code, std::string(row.name));
      QCOMPARE(f.severity, row.severity);
      QCOMPARE(f.repair, row.repair);
      QCOMPARE(f.named_files(), std::vector<std::string>{"f"});
    }
    QCOMPARE(model::Finding(model::Code::WorldSizeMismatch).repair, model::RepairKind::Repartition);
    QCOMPARE(model::Finding(model::Code::OptimizerStateShapeMismatch).repair,
             model::RepairKind::ResetOptimizer);
    QCOMPARE(model::Finding(model::Code::RankFileTruncated).repair, model::RepairKind::None);
    // A site that escalates or de-escalates says so with its severity; the repair stays the table's.
    const model::Finding warned(model::Code::ShardUnreadable, model::Severity::Warning, "m");
    QCOMPARE(warned.severity, model::Severity::Warning);
    QCOMPARE(warned.repair, model::default_repair(model::Code::ShardUnreadable));
  }

  // A severity spelled at a site equals the table's only by mistake: the table gives it. core/src's sites
  // that pass a code and then a severity (`Code::X, Severity::Y`) must pass one that differs from X's row.
  void noSitePassesTheTablesOwnSeverity() {
    const std::string table = test::read_text(test::source_dir() + "/core/src/model/finding_codes.cpp");
    std::map<std::string, std::string> name_of;  // enumerator -> code
    const std::regex row(R"re(\{Code::(\w+),\s*"([a-z0-9-]+)")re");
    for (auto it = std::sregex_iterator(table.begin(), table.end(), row); it != std::sregex_iterator(); ++it)
      name_of[(*it)[1].str()] = (*it)[2].str();
    QCOMPARE(name_of.size(), model::all_codes().size());
    const std::regex site(
        R"re(Code::(\w+)\)?\s*,\s*(?:model::|analysis::)?Severity::(Info|Warning|Error)\b)re");
    std::vector<std::string> same;
    for (const auto& e : fs::recursive_directory_iterator(fs::path(test::source_dir()) / "core" / "src")) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      if (e.path().filename() == "finding_codes.cpp") continue;
      const std::string text = test::read_text(e.path().string());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), site); it != std::sregex_iterator();
           ++it) {
        const auto code = name_of.find((*it)[1].str());
        if (code == name_of.end()) continue;
        const auto sev = model::severity_name(model::default_severity(model::code_of(code->second)));
        std::string spelled = (*it)[2].str();
        spelled[0] = static_cast<char>(std::tolower(spelled[0]));
        if (spelled == sev) same.push_back(e.path().string() + ": Code::" + (*it)[1].str() + ", " + spelled);
      }
    }
    std::string list;
    for (const auto& s : same) list += "\n  " + s;
    QVERIFY2(same.empty(), ("sites that pass the table's own severity:" + list).c_str());
  }

  // What real DeepSpeed checkpoints report (the committed fixtures, and one with a rank file removed) is in
  // the table: diagnose --json of each, every finding code looked up.
  void realCheckpointCodesAreInTheTable() {
    test::TempDir tmp;
    const std::string damaged = tmp.file("zero2_fp16_ws2");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2"), damaged);
    int removed = 0;
    for (const auto& e : fs::recursive_directory_iterator(damaged))
      if (e.path().filename().string().rfind("bf16_zero_pp_rank_1", 0) == 0 ||
          e.path().filename().string().rfind("zero_pp_rank_1", 0) == 0) {
        fs::remove(e.path());
        ++removed;
        break;
      }
    QCOMPARE(removed, 1);
    std::vector<std::string> inputs{damaged};
    for (const auto& name : {"zero1_fp16_ws2", "zero2_bf16_ws2", "zero2_fp16_ws2", "zero3_fp16_ws2",
                             "bf16opt_zero1_ws2", "v0184_bf16_z0_ws2"})
      inputs.push_back(test::deepspeed_fixture(name));
    std::set<std::string> codes;
    for (const auto& in : inputs) {
      const auto r = test::run_cli({"diagnose", "--json", in});
      const auto report = QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
      QVERIFY2(report.contains("findings"), (in + ": " + r.out + r.err).c_str());
      for (const auto& f : report["findings"].toArray()) {
        const std::string code = f.toObject()["code"].toString().toStdString();
        codes.insert(code);
        QVERIFY2(model::find_code(code), (in + ": finding code '" + code + "' is not in the table").c_str());
      }
    }
    QVERIFY2(codes.count("rank-file-missing"), "the damaged copy did not report its missing rank file");
  }

  void noCodeIsSpelledOutsideTheTable() {
    const auto found = literal_codes(test::source_dir());
    std::string list;
    for (const auto& f : found) {
      qWarning("%s", f.c_str());  // all of them: the failure message below is cut short
      list += "\n  " + f;
    }
    QVERIFY2(found.empty(),
             ("finding codes spelled as string literals (use model::Code from model/finding_codes.h):" + list)
                 .c_str());
  }
};

CKPTDOC_TEST_MAIN(TestFindingCodes)
#include "test_finding_codes.moc"
