#include "realds_support.h"

#include <QJsonDocument>
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace ckptdoc::test::realds {
namespace {

std::string realds_script() {
  return source_dir() + "/tests/realds/realds.py";
}

std::vector<std::string> common_args() {
  std::vector<std::string> a{realds_script()};
  if (const char* c = std::getenv("CKPTDOC_REALDS_CACHE"); c && *c) a.insert(a.end(), {"--cache", c});
  if (const char* s = std::getenv("CKPTDOC_SHARED"); s && *s) a.insert(a.end(), {"--shared", s});
  return a;
}

RunResult realds(const std::vector<std::string>& args, int timeout_ms = 900000) {
  auto all = common_args();
  all.insert(all.end(), args.begin(), args.end());
  return run(python(), all, timeout_ms);
}

// Python's json writes NaN/Infinity (stats of ZeRO-3 padding, a diverged loss); Qt's parser rejects them.
QJsonObject parse_json(const std::string& text, const std::string& what) {
  QByteArray bytes = QByteArray::fromStdString(text);
  bytes.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null");
  QJsonParseError err{};
  const auto doc = QJsonDocument::fromJson(bytes, &err);
  if (err.error != QJsonParseError::NoError || !doc.isObject())
    throw std::runtime_error(what + ": not a JSON object (" + err.errorString().toStdString() + ")");
  return doc.object();
}

}  // namespace

std::string unavailable_reason() {
  static std::once_flag once;
  static std::string reason;
  std::call_once(once, [] {
    const RunResult r = realds({"status"}, 60000);
    if (r.exit_code != 0)
      reason = r.err.empty() ? "realds.py status exited " + std::to_string(r.exit_code) : r.err;
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
  });
  return reason;
}

std::string unavailable_reason(const std::string& ds) {
  if (std::string r = unavailable_reason(); !r.empty()) return r;
  const RunResult r = realds({"status", "--ds", ds}, 60000);
  std::string reason;
  if (r.exit_code != 0)
    reason = r.err.empty() ? "realds.py status --ds " + ds + " exited " + std::to_string(r.exit_code) : r.err;
  while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
  return reason;
}

std::string version_of(const std::string& name) {
  if (name.rfind("v019_", 0) == 0) return "0.19";
  if (name.rfind("v0176_", 0) == 0) return "0.17.6";
  if (name.rfind("v0184_", 0) == 0) return "0.18.4";
  if (name.rfind("v145_", 0) == 0 || (name.size() > 5 && name.compare(name.size() - 5, 5, "_v145") == 0))
    return "0.14.5";
  return "0.12.6";
}

bool required() {
  const char* v = std::getenv("CKPTDOC_REQUIRE_DEEPSPEED");
  return v && std::string(v) == "1";
}

Entry checkpoint(const std::string& name) {
  const RunResult r = realds({"path", name});
  if (r.exit_code != 0) throw std::runtime_error("realds.py path " + name + " failed:\n" + r.err);
  const QJsonObject j = parse_json(r.out, "realds.py path " + name);
  Entry e;
  e.name = name;
  e.kind = j["kind"].toString().toStdString();
  e.save_dir = j["save_dir"].toString().toStdString();
  e.tag = j["tag"].toString().toStdString();
  e.dtype = j["dtype"].toString().toStdString();
  e.model = j["model"].toString().toStdString();
  e.ds = j["ds"].toString().toStdString();
  e.stage = j["stage"].toInt();
  e.dp = j["dp"].toInt();
  e.steps = j["steps"].toInt();
  e.bf16opt = j["bf16opt"].toBool();
  e.pp = j["pp"].toInt(1);
  e.tp = j["tp"].toInt(1);
  e.ep = j["ep"].toInt(1);
  e.world = j["world"].toInt(e.dp);
  e.spec = j;
  return e;
}

std::string copy_of(const Entry& e, const TempDir& dir, const std::string& as) {
  const std::string to = dir.file(as);
  copy_tree(e.save_dir, to);
  return to;
}

std::string reference(const std::string& name, const std::string& kind) {
  const RunResult r = realds({"ref", name, kind});
  if (r.exit_code != 0) throw std::runtime_error("realds.py ref " + name + " " + kind + " failed:\n" + r.err);
  std::string path = r.out;
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  return path;
}

std::string LoadCheck::describe() const {
  std::string s = "ds_load_check exit " + std::to_string(exit_code) + "; verdict " +
                  QJsonDocument(verdict()).toJson(QJsonDocument::Compact).toStdString();
  const auto first = report["load"].toObject()["first_exception"].toObject();
  if (!first.isEmpty())
    s += "\nload raised: " + QJsonDocument(first).toJson(QJsonDocument::Compact).toStdString();
  for (const char* k : {"expect_fp32", "expect_moments"})
    if (report.contains(k)) {
      QJsonObject c = report[k].toObject();
      for (const char* m : {"exp_avg", "exp_avg_sq"})
        if (c.contains(m)) {
          QJsonObject inner = c[m].toObject();
          inner.remove("notes");
          c[m] = inner;
        }
      s += std::string("\n") + k + ": " +
           QJsonDocument(c).toJson(QJsonDocument::Compact).left(3000).toStdString();
    }
  s += "\nlog tail:\n" + (log.size() > 3000 ? log.substr(log.size() - 3000) : log);
  return s;
}

LoadCheck load(const std::string& ckpt, const std::string& like, const std::vector<std::string>& extra,
               int world, const std::string& ds) {
  TempDir tmp;
  const std::string out = tmp.file("load.json");
  std::vector<std::string> args{"check", ckpt, "--like", like, "--json", out};
  if (world > 0) args.insert(args.end(), {"--world", std::to_string(world)});
  if (!ds.empty()) args.insert(args.end(), {"--ds", ds});
  if (!extra.empty()) {
    args.push_back("--");
    args.insert(args.end(), extra.begin(), extra.end());
  }
  const RunResult r = realds(args);
  LoadCheck c;
  c.exit_code = r.exit_code;
  c.log = r.out + r.err;
  const std::string text = read_text(out);
  if (text.empty()) throw std::runtime_error("ds_load_check wrote no report for " + ckpt + ":\n" + c.log);
  c.report = parse_json(text, "ds_load_check report for " + ckpt);
  return c;
}

RunResult repair(const std::string& in, const std::string& out, const std::vector<std::string>& action) {
  std::vector<std::string> args{"repair", in, "-o", out, "--device", "cpu"};
  args.insert(args.end(), action.begin(), action.end());
  return run_cli(args);
}

RunResult zero_to_fp32(const std::string& ckpt, const std::string& out, const std::string& ds) {
  return realds({"zero-to-fp32", ckpt, out, "--ds", ds});
}

RunResult python_with_deepspeed(const std::vector<std::string>& args, const std::string& ds) {
  std::vector<std::string> a{"py", "--ds", ds, "--"};
  a.insert(a.end(), args.begin(), args.end());
  return realds(a);
}

RunResult python_with_megatron_core(const std::vector<std::string>& args, const std::string& mcore) {
  std::vector<std::string> a{"py", "--ds", "0.19", "--mcore", mcore, "--"};
  a.insert(a.end(), args.begin(), args.end());
  return realds(a);
}

RunResult launch(const std::vector<std::string>& script_and_args, int world, const std::string& ds,
                 const std::string& logdir) {
  std::vector<std::string> a{"launch", "--world", std::to_string(world), "--ds", ds};
  if (!logdir.empty()) a.insert(a.end(), {"--logdir", logdir});
  a.push_back("--");
  a.insert(a.end(), script_and_args.begin(), script_and_args.end());
  return realds(a);
}

RunResult launch_with_megatron_core(const std::vector<std::string>& script_and_args, int world,
                                    const std::string& mcore, const std::string& logdir) {
  std::vector<std::string> a{"launch", "--world", std::to_string(world), "--ds", "0.19", "--mcore", mcore};
  if (!logdir.empty()) a.insert(a.end(), {"--logdir", logdir});
  a.push_back("--");
  a.insert(a.end(), script_and_args.begin(), script_and_args.end());
  return realds(a);
}

RunResult launch_with_torchtitan(const std::vector<std::string>& script_and_args, int world,
                                 const std::string& logdir) {
  std::vector<std::string> a{"launch", "--world", std::to_string(world), "--ds", "0.19", "--torchtitan"};
  if (!logdir.empty()) a.insert(a.end(), {"--logdir", logdir});
  a.push_back("--");
  a.insert(a.end(), script_and_args.begin(), script_and_args.end());
  return realds(a);
}

std::vector<std::string> codes(const QJsonObject& report, const std::string& severity) {
  std::vector<std::string> out;
  for (const auto& f : report["findings"].toArray()) {
    const auto o = f.toObject();
    if (o["severity"].toString().toStdString() == severity) out.push_back(o["code"].toString().toStdString());
  }
  return out;
}

bool has_code(const QJsonObject& report, const std::string& severity, const std::string& code) {
  const auto all = codes(report, severity);
  return std::find(all.begin(), all.end(), code) != all.end();
}

QJsonObject finding(const QJsonObject& report, const QString& code) {
  for (const auto& f : report["findings"].toArray())
    if (f.toObject()["code"].toString() == code) return f.toObject();
  return {};
}

QJsonObject diagnose_json(const std::string& path, int want_exit) {
  const auto r = run_cli({"diagnose", path, "--json", "--device", "cpu"});
  if (r.exit_code != want_exit) {
    QTest::qFail(("diagnose " + path + " exit " + std::to_string(r.exit_code) + ", wanted " +
                  std::to_string(want_exit) + ":\n" + r.out + r.err)
                     .c_str(),
                 __FILE__, __LINE__);
    return {};
  }
  return parse(r.out);
}

std::string megatron_iteration_dir(const Entry& e) {
  return e.save_dir + "/iter_" + std::string(e.tag.size() < 7 ? 7 - e.tag.size() : 0, '0') + e.tag;
}

QJsonObject parse(const std::string& text) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(text)).object();
}

std::string describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n" + r.out.substr(0, 4000) + r.err.substr(0, 4000);
}

QJsonObject compare_universal_folders(const std::string& theirs, const std::string& ours,
                                      const std::string& ds, const std::vector<std::string>& allowed_extra,
                                      const TempDir& dir) {
  const std::string out = dir.file("compare.json");
  std::vector<std::string> args{source_dir() + "/tests/realds/compare_universal.py", theirs, ours, "--json",
                                out};
  for (const auto& a : allowed_extra) args.insert(args.end(), {"--allowed-extra", a});
  const auto r = python_with_deepspeed(args, ds);
  if (r.exit_code == 2) throw std::runtime_error("compare_universal.py failed: " + describe(r));
  return parse(read_text(out));
}

}  // namespace ckptdoc::test::realds
