// The repair dialog tells the truth about its output: Cancel pressed while the written output is being
// verified ends with "written, but not verified" and the output kept (it used to say "Cancelled; nothing was
// written" with a complete output on disk); Cancel while writing still means nothing was written. The actions
// are the user's to choose, and a combination the planner refuses says why.
#include <QCheckBox>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <atomic>
#include <filesystem>

#include "app_settings.h"
#include "ckptdoc/io/held_write_io.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "repair_dialog.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;
namespace fs = std::filesystem;

namespace {

// The real file system, except that the rename publishing the output waits until the test lets it go on.
class PausingIo : public FileIo {
 public:
  int open_write(const std::string& p, int* fd) override { return real_.open_write(p, fd); }
  int write(int fd, const uint8_t* d, size_t n, size_t* w) override { return real_.write(fd, d, n, w); }
  int fsync(int fd) override { return real_.fsync(fd); }
  int close(int fd) override { return real_.close(fd); }
  int rename(const std::string& from, const std::string& to) override {
    return paused(from, to, real_.rename(from, to));
  }
  int rename_noreplace(const std::string& from, const std::string& to) override {
    return paused(from, to, real_.rename_noreplace(from, to));
  }
  // The partial folder renamed into place (not a file renamed inside it).
  int paused(const std::string& from, const std::string& to, int err) {
    if (err == 0 && from.find(".ckptdoc-partial-") != std::string::npos &&
        to.find(".ckptdoc-partial-") == std::string::npos) {
      published = true;
      while (!go_on) QThread::msleep(5);
    }
    return err;
  }
  int unlink(const std::string& p) override { return real_.unlink(p); }
  int mkdir(const std::string& p) override { return real_.mkdir(p); }
  int fsync_dir(const std::string& p) override { return real_.fsync_dir(p); }
  std::atomic<bool> published{false}, go_on{false};

 private:
  FileIo& real_ = posix_io();
};

// The session analyses a copy of zero2_fp16_ws2 whose fp32 masters are noise (on the CPU).
bool openStale(Session& session, const test::TempDir& dir) {
  session.setDevice(DeviceKind::Cpu);
  QSignalSpy analysed(&session, &Session::analysisFinished);
  session.open(QString::fromStdString(test::make_stale_masters_checkpoint(dir)));
  return analysed.wait(120000);
}

// The dialog shown, writing to `out`, once its plan is made: whether the planner accepted it.
bool planned(RepairDialog& d, const std::string& out) {
  d.show();
  d.setOutput(QString::fromStdString(out));
  return QTest::qWaitFor([&] { return !d.planning(); }, 60000) && d.planValid();
}

QPushButton* button(RepairDialog& d, const QString& text) {
  for (auto* b : d.findChildren<QPushButton*>())
    if (b->text() == text) return b;
  return nullptr;
}

}  // namespace

class TestRepairDialog : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
  }

  // A combination the planner refuses shows its reason and cannot run; undoing it brings the plan back.
  void refusedCombinationShowsThePlannersReason() {
    test::TempDir dir;
    Session session;
    QVERIFY(openStale(session, dir));
    RepairDialog d(&session, analysis::RepairKind::DropOptimizer);
    QVERIFY2(planned(d, dir.file("out")), qPrintable(d.planText()));
    auto* reset = d.findChild<QCheckBox*>("repairResetOptimizer");
    QVERIFY(reset && !reset->isChecked());
    QTest::mouseClick(reset, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!d.planning(), 60000);
    QVERIFY(!d.planValid());
    QVERIFY(!d.runButton()->isEnabled());
    QLabel* why = nullptr;
    for (auto* l : d.findChildren<QLabel*>())
      if (l->isVisible() && l->text().contains("cannot be combined")) why = l;
    QVERIFY(why);
    QTest::mouseClick(reset, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!d.planning(), 60000);
    QVERIFY(d.planValid());
    QVERIFY(d.runButton()->isEnabled());
  }

  // Cancel while the repaired copy is being written (its first write held): the dialog says what the other
  // dialogs say of a cancelled repair, and no output or partial folder is left.
  void cancelWhileWritingSaysNothingWasWritten() {
    test::TempDir dir;
    Session session;
    QVERIFY(openStale(session, dir));
    RepairDialog d(&session, analysis::RepairKind::RefreshFp32);
    QVERIFY2(planned(d, dir.file("repaired")), qPrintable(d.planText()));
    HeldWriteIo io(/*hold_at=*/1);
    ScopedFileIo scoped(io);
    QTest::mouseClick(d.runButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(io.held(), 60000);
    QPushButton* cancel = button(d, "Cancel");
    QVERIFY(cancel);
    QTest::mouseClick(cancel, Qt::LeftButton);
    io.release();
    const QString said = QStringLiteral("Repair cancelled; nothing was written.");
    auto saysIt = [&] {
      for (auto* l : d.findChildren<QLabel*>())
        if (l->isVisible() && l->text() == said) return true;
      return false;
    };
    QTRY_VERIFY_WITH_TIMEOUT(saysIt(), 60000);
    QVERIFY(!d.result());
    for (const auto& e : fs::directory_iterator(dir.path()))  // no output, no partial folder
      QVERIFY2(e.path().filename().string().rfind("repaired", 0) != 0, e.path().c_str());
  }

  void cancelDuringVerificationSaysWrittenButUnverified() {
    test::TempDir dir;
    Session session;
    QVERIFY(openStale(session, dir));
    PausingIo io;
    ScopedFileIo scoped(io);
    RepairDialog d(&session, analysis::RepairKind::RefreshFp32);
    const std::string out = dir.file("repaired");
    QVERIFY2(planned(d, out), qPrintable(d.planText()));
    QSignalSpy finished(&d, &RepairDialog::repairFinished);
    QTest::mouseClick(d.runButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(io.published.load(), 120000);
    QPushButton* cancel = button(d, "Cancel");
    QVERIFY(cancel);
    QTest::mouseClick(cancel, Qt::LeftButton);  // the output is in place; its verification has not started
    io.go_on = true;
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.first().first().toBool(), false);
    QVERIFY(d.result());
    QVERIFY(d.result()->state == repair::OutputState::VerificationIncomplete);
    QVERIFY(d.result()->verification_cancelled);
    auto* label = d.findChild<QLabel*>("repairResult");
    QVERIFY(label && label->isVisible());
    QVERIFY2(label->text().contains("not verified") && !label->text().contains("nothing was written"),
             qPrintable(label->text()));
    QVERIFY(fs::exists(out + "/latest"));
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestRepairDialog)
#include "test_repair_dialog.moc"
