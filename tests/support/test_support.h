#pragma once
// Shared helpers for ckptdoc's Qt Test suites: where things are, scratch folders, and running the
// reference Python (Debian's torch) or the ckptdoc CLI as a user would.
#include <QString>
#include <QStringList>
#include <string>
#include <vector>

namespace ckptdoc::test {

std::string source_dir();     // repository root
std::string fixtures_dir();   // ../shared/fixtures (read-only in CI)
std::string deepspeed_fixture(const std::string& name);  // .../deepspeed/<name>
std::string python();         // /usr/bin/python3 (has torch)
std::string cli();            // path of the built ckptdoc executable
std::string script(const std::string& relative);  // tests/<relative>

// A fresh directory under the system temp folder, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};
// Runs a program with arguments (no shell), waiting up to timeout_ms.
RunResult run(const std::string& program, const std::vector<std::string>& args, int timeout_ms = 600000);
RunResult run_python(const std::string& script_path, const std::vector<std::string>& args);
RunResult run_cli(const std::vector<std::string>& args);

// Copies a directory tree (fixtures are read-only; tests that damage or repair work on copies).
void copy_tree(const std::string& from, const std::string& to);
std::string read_text(const std::string& path);
// Names of the entries of a folder, sorted.
std::vector<std::string> files_in(const std::string& dir);
void write_text(const std::string& path, const std::string& text);
// XORs `mask` into byte `at` of the first tensor-data record ("*/data/*", at least 64 bytes) of the torch zip
// file at `path`, in place, and returns that record's name: damage that parses and looks plausible.
std::string flip_bits_in_first_data_record(const std::string& path, uint64_t at, uint8_t mask);

}  // namespace ckptdoc::test

// Fails the current test with the run's output when it did not exit with `code`.
#define CKPTDOC_EXPECT_EXIT(result, code)                                                              \
  QVERIFY2((result).exit_code == (code),                                                               \
           qPrintable(QString("exit %1 (wanted %2)\nstdout:\n%3\nstderr:\n%4")                         \
                          .arg((result).exit_code)                                                     \
                          .arg(code)                                                                   \
                          .arg(QString::fromStdString((result).out).right(4000))                        \
                          .arg(QString::fromStdString((result).err).right(4000))))
