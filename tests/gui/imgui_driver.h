#pragma once
// The ImGui view (ckptdoc-imgui, $CKPTDOC_IMGUI) driven like a user on a private Xvfb (Mesa llvmpipe): its
// --script clicks through ImGui's own input (views/imgui/script.h). Shared by test_imgui_scripted and the
// realds_gui tests.
#include <QProcess>
#include <QStandardPaths>
#include <filesystem>
#include <string>
#include <vector>

#include "gui_fixtures.h"

namespace ckptdoc {

inline std::string imgui() {
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

inline test::RunResult runScript(const Xvfb& x, const test::TempDir& dir, const std::string& checkpoint,
                                 const std::string& script) {
  test::write_text(dir.file("run.script"), script);
  qputenv("DISPLAY", x.display());
  qputenv("XDG_CONFIG_HOME", QByteArray::fromStdString(dir.file("config")));  // the recent list goes there
  std::vector<std::string> args;
  if (!checkpoint.empty()) args.push_back(checkpoint);
  args.insert(args.end(), {"--script", dir.file("run.script"), "--size", "1280x800"});
  return test::run(imgui(), args, 600000);
}

}  // namespace ckptdoc
