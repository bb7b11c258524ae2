#pragma once
// Shared helpers for ckptdoc's Qt Test suites: where things are, scratch folders, and running the
// reference Python (Debian's torch) or the ckptdoc CLI as a user would.
#include <QCoreApplication>
#include <QString>
#include <QStringList>
#include <QTest>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace ckptdoc::test {

std::string source_dir();    // repository root
std::string fixtures_dir();  // tests/fixtures (the committed real DeepSpeed checkpoints are in deepspeed/)
std::string deepspeed_fixture(const std::string& name);  // .../deepspeed/<name>
std::string python();                                    // /usr/bin/python3 (has torch)
std::string cli();                                       // path of the built ckptdoc executable
std::string script(const std::string& relative);         // tests/<relative>

// Application settings (QSettings: recent files, device, ...) of this test process only, in a folder removed
// at exit: ctest runs every test function as its own process, in parallel, and a shared settings file races.
void use_private_settings();

// A live-run snapshot of the committed ZeRO-2 fixture at `out` (fixtures/make_snapshot.py: rank files first,
// the manifest last, renamed into place), with make_snapshot.py's ARGS; false (and a warning) on failure.
bool make_snapshot(const std::string& out, std::vector<std::string> args);

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

// Runs a Qt Test object. An exception that escapes a test function (a missing fixture, a helper that failed)
// ends the run as a failure that prints its message, instead of aborting it.
template <class TestObject>
int exec_tests(int argc, char** argv) {
  TestObject tc;
  try {
    return QTest::qExec(&tc, argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL!  : uncaught exception: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "FAIL!  : uncaught exception of unknown type\n");
  }
  return 1;
}

}  // namespace ckptdoc::test

// main() of a test executable, instead of QTEST_GUILESS_MAIN / QTEST_APPLESS_MAIN (see exec_tests).
#define CKPTDOC_TEST_MAIN(TestObject)                         \
  int main(int argc, char** argv) {                           \
    QCoreApplication app(argc, argv);                         \
    return ckptdoc::test::exec_tests<TestObject>(argc, argv); \
  }
#define CKPTDOC_TEST_MAIN_APPLESS(TestObject)                 \
  int main(int argc, char** argv) {                           \
    return ckptdoc::test::exec_tests<TestObject>(argc, argv); \
  }

// Fails the current test with the run's output when it did not exit with `code`.
// `result` is evaluated once: QVERIFY2 evaluates its message even when the check passes, so naming `result`
// there ran the command four times (a damage script applied four times, every DeepSpeed launch repeated).
#define CKPTDOC_EXPECT_EXIT(result, code)                                                    \
  do {                                                                                       \
    const auto& ckptdoc_result_ = (result);                                                  \
    QVERIFY2(ckptdoc_result_.exit_code == (code),                                            \
             qPrintable(QString("exit %1 (wanted %2)\nstdout:\n%3\nstderr:\n%4")             \
                            .arg(ckptdoc_result_.exit_code)                                  \
                            .arg(code)                                                       \
                            .arg(QString::fromStdString(ckptdoc_result_.out).right(4000))    \
                            .arg(QString::fromStdString(ckptdoc_result_.err).right(4000)))); \
  } while (false)
