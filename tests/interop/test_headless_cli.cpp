// The ckptdoc CLI starts on a node without Qt or MPI: it links neither (the desktop app is ckptdoc-gui, which
// `ckptdoc gui` runs; MPI is libckptdoc_mpi.so, loaded only under an MPI launcher), and says so when either
// is missing instead of running without it.
#include <QStandardPaths>
#include <QtTest>
#include <filesystem>
#include <sstream>
#include <utility>

#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

// Sets an environment variable for the processes this test starts, restoring it on scope exit.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name), had_(qEnvironmentVariableIsSet(name)) {
    if (had_) old_ = qgetenv(name);
    qputenv(name, QByteArray::fromStdString(value));
  }
  ~ScopedEnv() {
    if (had_)
      qputenv(name_, old_);
    else
      qunsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_;
  QByteArray old_;
};

// A copy of the CLI alone in a folder: nothing beside it (no ckptdoc-gui, no MPI plug-in).
std::string lone_cli(const test::TempDir& dir) {
  const std::string copy = dir.file("ckptdoc");
  fs::copy_file(test::cli(), copy);
  return copy;
}

std::string tag_dir() {
  return test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint/global_step5";
}

// Width and height from a PNG's IHDR chunk (bytes 16..23, big-endian).
std::pair<uint32_t, uint32_t> png_size(const std::string& path) {
  const std::string b = test::read_text(path);
  if (b.size() < 24) return {0, 0};
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

class TestHeadlessCli : public QObject {
  Q_OBJECT

 private slots:
  // The dynamic section's NEEDED entries: no Qt, no MPI (the loader would refuse to start ckptdoc without
  // them).
  void cliNeedsNoQtAndNoMpi() {
    const QString readelf = QStandardPaths::findExecutable("readelf");
    if (readelf.isEmpty()) QSKIP("readelf (binutils) is not installed");
    const auto r = test::run(readelf.toStdString(), {"-d", "-W", test::cli()});
    CKPTDOC_EXPECT_EXIT(r, 0);
    std::istringstream lines(r.out);
    int needed = 0;
    for (std::string line; std::getline(lines, line);) {
      if (!mentions(line, "(NEEDED)")) continue;
      ++needed;
      QVERIFY2(!mentions(line, "[libQt"), line.c_str());
      QVERIFY2(!mentions(line, "[libmpi"), line.c_str());
    }
    QVERIFY2(needed > 0, r.out.c_str());  // a static or unreadable binary would pass vacuously
  }

  // Without ckptdoc-gui beside it or on PATH, `gui` says where it looked and exits 2.
  void guiWithoutTheAppSaysWhereItLooked() {
    test::TempDir dir;
    const std::string cli = lone_cli(dir);
    ScopedEnv path("PATH", dir.file("empty"));
    const auto r = test::run(cli, {"gui", tag_dir()}, 60000);
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, dir.file("ckptdoc-gui")), r.err.c_str());
    QVERIFY2(mentions(r.err, "PATH"), r.err.c_str());
  }

  // Under an MPI launcher without the plug-in, every process alone would do the whole job: refuse, naming the
  // paths tried and the loader's reason.
  void underALauncherWithoutThePluginRefuses() {
    test::TempDir dir;
    const std::string cli = lone_cli(dir);
    ScopedEnv launcher("OMPI_COMM_WORLD_SIZE", "2");
    const auto r = test::run(cli, {"diagnose", "--device", "cpu", tag_dir()}, 60000);
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, dir.file("libckptdoc_mpi.so")), r.err.c_str());
    QVERIFY2(mentions(r.err, "No such file"), r.err.c_str());  // dlerror()'s text
    QVERIFY2(mentions(r.err, "OMPI_COMM_WORLD_SIZE"), r.err.c_str());
    QVERIFY2(r.out.empty(), r.out.c_str());
  }

  // A file in the plug-in's place that is not one: dlerror()'s reason, not a single process.
  void underALauncherABrokenPluginRefuses() {
    test::TempDir dir;
    const std::string cli = lone_cli(dir);
    test::write_text(dir.file("libckptdoc_mpi.so"), "not a shared library\n");
    ScopedEnv launcher("PMI_SIZE", "2");
    const auto r = test::run(cli, {"diagnose", "--device", "cpu", tag_dir()}, 60000);
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, dir.file("libckptdoc_mpi.so") + ": "), r.err.c_str());
    QVERIFY2(mentions(r.err, "PMI_SIZE"), r.err.c_str());
    QVERIFY2(r.out.empty(), r.out.c_str());
  }

  // Without a launcher the plug-in is not needed: the lone copy diagnoses as one process.
  void withoutALauncherOneProcessRuns() {
    test::TempDir dir;
    const std::string cli = lone_cli(dir);
    const auto r = test::run(cli, {"inspect", tag_dir()}, 120000);
    CKPTDOC_EXPECT_EXIT(r, 0);
  }

  // `ckptdoc gui` hands its options to ckptdoc-gui: a screenshot of the size asked for comes out.
  void guiRunsTheAppWithItsOptions() {
    const std::string app = (fs::path(test::cli()).parent_path() / "ckptdoc-gui").string();
    if (!fs::exists(app)) QSKIP("ckptdoc-gui is not built (no Qt GUI in this build)");
    test::TempDir dir;
    const std::string png = dir.file("layout.png");
    ScopedEnv platform("QT_QPA_PLATFORM", "offscreen");
    const auto r = test::run_cli({"gui", tag_dir(), "--view", "layout", "--shade", "exact", "--size",
                                  "1000x700", "--screenshot", png});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY2(fs::exists(png), r.err.c_str());
    QCOMPARE(png_size(png), std::make_pair(1000u, 700u));
    const auto bad = test::run_cli({"gui", "--size", "wide"});
    CKPTDOC_EXPECT_EXIT(bad, 2);
    QVERIFY2(mentions(bad.err, "--size wants WxH"), bad.err.c_str());
  }
};

CKPTDOC_TEST_MAIN(TestHeadlessCli)
#include "test_headless_cli.moc"
