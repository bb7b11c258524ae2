#include "storage_expectations.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "findings_model.h"
#include "main_window.h"
#include "session.h"
#include "storage_map_widget.h"
#include "storage_view.h"
#include "stored_keys_model.h"
#include "test_support.h"

namespace ckptdoc::test {

namespace {

QJsonObject parse(const std::string& text) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(text)).object();
}

// One DCP folder's inspect JSON (its "keys"), files named with `prefix`.
void add_keys(const QJsonObject& md, const std::string& prefix, StorageShown& out) {
  for (const auto& f : md["files"].toArray()) out.files[prefix + f.toString().toStdString()];
  auto place = [&](const std::string& key, const QJsonValue& item) {
    if (!item.isObject()) return;
    const auto o = item.toObject();
    out.files[prefix + o["file"].toString().toStdString()].emplace_back(
        key, static_cast<uint64_t>(o["offset"].toDouble()), static_cast<uint64_t>(o["length"].toDouble()));
  };
  for (const auto& kv : md["keys"].toArray()) {
    const auto k = kv.toObject();
    const std::string key = k["key"].toString().toStdString();
    out.keys.push_back(key);
    if (k["kind"].toString() == "tensor")
      for (const auto& c : k["chunks"].toArray()) place(key, c.toObject()["item"]);
    else
      place(key, k["item"]);
  }
}

void sort_items(StorageShown& s) {
  for (auto& [name, items] : s.files) std::sort(items.begin(), items.end());
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at; (at = line.find(sep, start)) != std::string::npos; start = at + 1)
    out.push_back(line.substr(start, at - start));
  out.push_back(line.substr(start));
  return out;
}

}  // namespace

namespace {

// The CLI's run, or a failure that says why it did not run (a timeout, a binary that could not start) rather
// than a bare exit code the caller then compares.
RunResult ran_cli(const std::vector<std::string>& args) {
  RunResult r = run_cli(args);
  if (r.exit_code < 0)
    throw std::runtime_error("ckptdoc " + args.front() + " did not run to its end: " + r.err);
  return r;
}

}  // namespace

StorageShown cli_storage(const std::string& path, int* diagnose_exit) {
  StorageShown out;
  const auto inspect = ran_cli({"inspect", path, "--json"});
  const QJsonObject j = parse(inspect.out);
  if (j.contains("parts")) {  // Accelerate: each part's metadata, its files under the part's folder
    for (const auto& p : j["parts"].toArray())
      add_keys(p.toObject()["metadata"].toObject(), p.toObject()["folder"].toString().toStdString() + "/",
               out);
  } else {
    add_keys(j, "", out);
  }
  sort_items(out);
  const auto diagnose = ran_cli({"diagnose", path, "--json"});
  if (diagnose_exit) *diagnose_exit = diagnose.exit_code;
  const QJsonObject d = parse(diagnose.out);
  for (const auto& p : d["problems"].toArray()) {
    const auto o = p.toObject();
    out.findings.emplace_back(o["code"].toString().toStdString(), o["severity"].toString().toStdString(),
                              o["message"].toString().toStdString());
  }
  out.verdict = d["verdict"].toObject()["text"].toString().toStdString();
  return out;
}

StorageShown qt_storage(gui::MainWindow& w) {
  StorageShown out;
  const auto* view = w.storageView();
  const auto& pic = view->map()->picture();
  const auto* map = w.session()->core().storage_map();
  for (size_t r = 0; r < pic.rows.size(); ++r) {
    auto& items = out.files[pic.rows[r].label];
    for (const auto& b : pic.rows[r].boxes) {
      const auto& item = map->files[r].items[b.item];
      // What the box covers, read back from its drawn fractions of the picture's scale.
      const auto offset = static_cast<uint64_t>(std::llround(b.x0 * static_cast<double>(pic.scale)));
      const auto end = static_cast<uint64_t>(std::llround(b.x1 * static_cast<double>(pic.scale)));
      items.emplace_back(item.key, offset, end - offset);
    }
  }
  sort_items(out);
  const auto* keys = view->keys();
  for (int r = 0; r < keys->rowCount(); ++r)
    out.keys.push_back(
        keys->data(keys->index(r, gui::StoredKeysModel::Key), Qt::DisplayRole).toString().toStdString());
  const auto* f = w.findingsModel();
  for (int r = 0; r < f->count(); ++r) {
    const auto& finding = f->finding(r);
    out.findings.emplace_back(finding.code, std::string(analysis::severity_name(finding.severity)),
                              finding.message);
  }
  if (const auto* label = w.findChild<QLabel*>(QStringLiteral("sourceVerdictLabel")))
    out.verdict = label->text().split(QLatin1Char('\n')).first().toStdString();
  return out;
}

StorageShown imgui_storage(const std::string& storage_tsv, const std::string& findings_tsv) {
  StorageShown out;
  std::ifstream s(storage_tsv);
  for (std::string line; std::getline(s, line);) {
    const auto c = split(line, '\t');
    if (c.size() != 5) continue;
    out.files[c[0]].emplace_back(c[2], std::stoull(c[3]), std::stoull(c[4]));
  }
  sort_items(out);
  std::ifstream f(findings_tsv);
  for (std::string line; std::getline(f, line);) {
    const auto c = split(line, '\t');
    if (c.size() == 3) out.findings.emplace_back(c[0], c[1], c[2]);
  }
  return out;
}

std::string storage_difference(const StorageShown& cli, const StorageShown& view) {
  std::ostringstream d;
  for (const auto& [name, items] : cli.files) {
    const auto it = view.files.find(name);
    if (it == view.files.end()) {
      d << "file " << name << ": the CLI names it, the view has no row\n";
      continue;
    }
    if (it->second != items)
      d << "file " << name << ": the CLI has " << items.size() << " items, the view " << it->second.size()
        << " (or they differ)\n";
  }
  for (const auto& [name, items] : view.files)
    if (!cli.files.count(name)) d << "file " << name << ": a row the CLI does not name\n";
  if (!cli.keys.empty() && !view.keys.empty() && cli.keys != view.keys)
    d << "keys: the CLI has " << cli.keys.size() << ", the view " << view.keys.size()
      << " (or they differ)\n";
  if (cli.findings != view.findings) {
    d << "findings differ:\n";
    for (const auto& [c, s, m] : cli.findings) d << "  cli:  " << c << " " << s << " " << m << "\n";
    for (const auto& [c, s, m] : view.findings) d << "  view: " << c << " " << s << " " << m << "\n";
  }
  if (!view.verdict.empty() && view.verdict != cli.verdict)
    d << "verdict: the CLI says '" << cli.verdict << "', the view '" << view.verdict << "'\n";
  return d.str();
}

}  // namespace ckptdoc::test
