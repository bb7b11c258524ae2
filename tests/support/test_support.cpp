#include "test_support.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QSettings>
#include <QTemporaryDir>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc::test {
namespace {
std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}
}  // namespace

std::string source_dir() {
  return env_or("CKPTDOC_SOURCE_DIR", ".");
}
std::string fixtures_dir() {
  return env_or("CKPTDOC_FIXTURES", source_dir() + "/tests/fixtures");
}
std::string deepspeed_fixture(const std::string& name) {
  return fixtures_dir() + "/deepspeed/" + name;
}
std::string python() {
  return env_or("CKPTDOC_PYTHON", "/usr/bin/python3");
}
std::string cli() {
  return env_or("CKPTDOC_CLI", "ckptdoc");
}
std::string script(const std::string& relative) {
  return source_dir() + "/tests/" + relative;
}

TempDir::TempDir() {
  auto base = std::filesystem::temp_directory_path() / "ckptdoc-test-XXXXXX";
  std::string templ = base.string();
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}
TempDir::~TempDir() {
  std::error_code ec;
  // Restore write bits first: copies of read-only fixtures keep their modes.
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
  }
  std::filesystem::remove_all(path_, ec);
}

RunResult run(const std::string& program, const std::vector<std::string>& args, int timeout_ms) {
  QProcess p;
  QStringList qargs;
  for (const auto& a : args) qargs << QString::fromStdString(a);
  p.start(QString::fromStdString(program), qargs);
  RunResult r;
  if (!p.waitForStarted(30000)) {
    r.err = "could not start " + program;
    return r;
  }
  p.closeWriteChannel();
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    r.err = "timed out: " + program;
  }
  r.out = p.readAllStandardOutput().toStdString();
  r.err += p.readAllStandardError().toStdString();
  r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
  return r;
}

RunResult run_python(const std::string& script_path, const std::vector<std::string>& args) {
  std::vector<std::string> all{script_path};
  all.insert(all.end(), args.begin(), args.end());
  return run(python(), all);
}

RunResult run_cli(const std::vector<std::string>& args) {
  return run(cli(), args);
}

void copy_tree(const std::string& from, const std::string& to) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(to, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::filesystem::permissions(
        it->path(),
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
            (it->is_directory() ? std::filesystem::perms::owner_exec : std::filesystem::perms::none),
        std::filesystem::perm_options::add, ec);
  }
  std::filesystem::permissions(to, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string flip_bits_in_first_data_record(const std::string& path, uint64_t at, uint8_t mask) {
  std::string record;
  uint64_t offset = 0;
  {
    ZipReader zip(MappedFile::open(path));
    for (const auto& e : zip.entries())
      if (e.name.find("/data/") != std::string::npos && e.size >= 64 && at < e.size) {
        record = e.name;
        offset = e.data_offset + at;
        break;
      }
  }
  if (record.empty()) throw std::runtime_error(path + ": no tensor-data record of at least 64 bytes");
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(static_cast<uint8_t>(c) ^ mask);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
  if (!f) throw std::runtime_error(path + ": could not rewrite byte " + std::to_string(offset));
  return record;
}

bool make_snapshot(const std::string& out, std::vector<std::string> args) {
  args.insert(args.begin(), {deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint/global_step5", out});
  const auto r = run_python(script("fixtures/make_snapshot.py"), args);
  if (r.exit_code != 0) qWarning("make_snapshot.py failed: %s", r.err.c_str());
  return r.exit_code == 0;
}

void use_private_settings() {
  static QTemporaryDir dir;  // removed when the process exits
  QCoreApplication::setOrganizationName("ckptdoc-test");
  QCoreApplication::setApplicationName("ckptdoc-test");
  for (auto format : {QSettings::NativeFormat, QSettings::IniFormat})
    QSettings::setPath(format, QSettings::UserScope, dir.path());
}

}  // namespace ckptdoc::test
