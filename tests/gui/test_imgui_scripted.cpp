// The ImGui view driven like a user on a private Xvfb (Mesa llvmpipe): its --script clicks through ImGui's own
// input. A broken real checkpoint opens, Fix is clicked, the plan appears, Repair is clicked; the view
// reports the output verified, and `ckptdoc diagnose` (another process) calls it clean. Also: a failed open
// is reported, a dropped folder opens and lands in the recent list.
#include <QFile>
#include <QProcess>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QtTest>
#include <filesystem>
#include <memory>

#include "gui_fixtures.h"
#include "gui_test_main.h"

using namespace ckptdoc;

namespace {

std::string imgui() {
  const QByteArray p = qgetenv("CKPTDOC_IMGUI");
  return p.isEmpty() ? std::string() : p.toStdString();
}

// A private X server (Mesa's llvmpipe renders in it): Xvfb picks a free display and says which on stdout.
class Xvfb {
 public:
  // Empty when it runs, else why not.
  std::string start() {
    if (imgui().empty() || !std::filesystem::exists(imgui())) return "this build has no ImGui view";
    const QString x = QStandardPaths::findExecutable("Xvfb");
    if (x.isEmpty()) return "Xvfb is not installed (apt-get install xvfb)";
    p_.start(x, {"-displayfd", "1", "-screen", "0", "1280x800x24", "-nolisten", "tcp"});
    if (!p_.waitForStarted(10000)) return "Xvfb did not start";
    QByteArray out;
    while (!out.contains('\n') && p_.waitForReadyRead(10000)) out += p_.readAllStandardOutput();
    if (!out.contains('\n')) return "Xvfb did not say its display";
    display_ = ":" + out.trimmed();
    return {};
  }
  ~Xvfb() {
    if (p_.state() == QProcess::NotRunning) return;
    p_.terminate();
    if (!p_.waitForFinished(5000)) p_.kill();
    p_.waitForFinished();
  }
  const QByteArray& display() const { return display_; }

 private:
  QProcess p_;
  QByteArray display_;
};

test::RunResult runScript(const Xvfb& x, const test::TempDir& dir, const std::string& checkpoint,
                          const std::string& script) {
  test::write_text(dir.file("run.script"), script);
  qputenv("DISPLAY", x.display());
  qputenv("XDG_CONFIG_HOME", QByteArray::fromStdString(dir.file("config")));  // the recent list goes there
  std::vector<std::string> args;
  if (!checkpoint.empty()) args.push_back(checkpoint);
  args.insert(args.end(), {"--script", dir.file("run.script"), "--size", "1280x800"});
  return test::run(imgui(), args, 600000);
}

std::vector<std::string> errorCodes(const std::string& json) {
  std::vector<std::string> out;
  const auto doc = QJsonDocument::fromJson(QByteArray::fromStdString(json));
  for (const auto& f : doc.object()["findings"].toArray())
    if (f.toObject()["severity"].toString() == "error")
      out.push_back(f.toObject()["code"].toString().toStdString());
  return out;
}

}  // namespace

class TestImguiScripted : public QObject {
  Q_OBJECT
 private slots:
  void init() {
    x_ = std::make_unique<Xvfb>();
    const std::string why = x_->start();
    if (!why.empty() && qgetenv("CKPTDOC_REQUIRE_XVFB") == "1") QFAIL(("CKPTDOC_REQUIRE_XVFB=1 but " + why).c_str());
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
