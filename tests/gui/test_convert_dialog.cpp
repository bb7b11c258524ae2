// Checkpoint > Convert to universal… writes a universal folder that another process (`ckptdoc inspect`) reads
// as one, verified by core; a checkpoint core cannot convert (ZeRO-3 saved by 0.12.6,
// whose version has no ZeRO-3 universal loader) says why and writes nothing; nor does a cancelled one.
#include <QAction>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <filesystem>

#include "app_settings.h"
#include "ckptdoc/io/held_write_io.h"
#include "convert_dialog.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "main_window.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;
namespace fs = std::filesystem;

namespace {

ConvertDialog* openConvert(MainWindow& w, const std::string& path) {
  QSignalSpy done(w.session(), &Session::analysisFinished);
  w.openPath(QString::fromStdString(path), true);
  if (!done.wait(120000)) return nullptr;
  auto* convert = w.findChild<QAction*>("convertAction");
  if (!convert || !convert->isEnabled()) return nullptr;
  convert->trigger();
  return w.findChild<ConvertDialog*>();
}

}  // namespace

class TestConvertDialog : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    AppSettings().setDevice(DeviceKind::Cpu);
  }

  void convertWritesAUniversalFolderInspectReads() {
    test::TempDir dir;
    MainWindow w;
    w.show();
    auto* convert = w.findChild<QAction*>("convertAction");
    QVERIFY(convert && !convert->isEnabled());  // nothing open
    ConvertDialog* d = openConvert(w, test::healthy_fixture("zero2_fp16_ws2"));
    QVERIFY(d);
    QVERIFY2(d->canRun(), qPrintable(d->summaryText()));
    QVERIFY(d->output().endsWith("-universal"));
    const std::string out = dir.file("converted");
    d->setOutput(QString::fromStdString(out));
    QVERIFY(d->summaryText().contains(QString::fromStdString(out)));
    QSignalSpy finished(d, &ConvertDialog::convertFinished);
    QTest::mouseClick(d->runButton(), Qt::LeftButton);
    QVERIFY(finished.wait(300000));
    QVERIFY2(finished.first().first().toBool(), qPrintable(d->findChild<QLabel*>("convertResult")->text()));
    QVERIFY(fs::exists(out + "/latest_universal"));
    // Another process reads what the click wrote as a universal checkpoint.
    const auto inspect = test::run_cli({"inspect", out, "--json"});
    CKPTDOC_EXPECT_EXIT(inspect, 0);
    const auto doc = QJsonDocument::fromJson(QByteArray::fromStdString(inspect.out)).object();
    QCOMPARE(doc["kind"].toString(), QStringLiteral("deepspeed-universal"));
    QCOMPARE(doc["global_steps"].toInt(), 5);  // the fixture's step, carried over
  }

  // Cancel while the universal folder is being written (its first write held): the dialog says so in the
  // words every view uses for a cancelled convert, and nothing is left at or beside the output's path.
  void cancelWhileWritingLeavesNothing() {
    test::TempDir dir;
    MainWindow w;
    w.show();
    ConvertDialog* d = openConvert(w, test::healthy_fixture("zero2_fp16_ws2"));
    QVERIFY(d);
    d->setOutput(QString::fromStdString(dir.file("converted")));
    HeldWriteIo io(/*hold_at=*/1);
    ScopedFileIo scoped(io);
    QSignalSpy finished(d, &ConvertDialog::convertFinished);
    QTest::mouseClick(d->runButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(io.held(), 60000);
    QPushButton* cancel = nullptr;
    for (auto* b : d->findChildren<QPushButton*>())
      if (b->text() == QStringLiteral("Cancel")) cancel = b;
    QVERIFY(cancel);
    QTest::mouseClick(cancel, Qt::LeftButton);
    io.release();
    QVERIFY(finished.wait(120000) || !finished.isEmpty());
    QCOMPARE(finished.first().first().toBool(), false);
    auto* label = d->findChild<QLabel*>("convertResult");
    QVERIFY(label && label->isVisible());
    QCOMPARE(label->text(), QStringLiteral("Convert cancelled; nothing was written."));
    QVERIFY(fs::is_empty(dir.path()));
  }

  void zero3IsRefusedAndNothingIsWritten() {
    test::TempDir dir;
    MainWindow w;
    w.show();
    ConvertDialog* d = openConvert(w, test::healthy_fixture("zero3_fp16_ws2"));
    QVERIFY(d);
    const std::string out = dir.file("universal");
    d->setOutput(QString::fromStdString(out));
    QSignalSpy finished(d, &ConvertDialog::convertFinished);
    QTest::mouseClick(d->runButton(), Qt::LeftButton);
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.first().first().toBool(), false);
    auto* label = d->findChild<QLabel*>("convertResult");
    QVERIFY(label && label->isVisible());
    QVERIFY2(label->text().contains("Nothing was written"), qPrintable(label->text()));
    QVERIFY(!fs::exists(out));
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestConvertDialog)
#include "test_convert_dialog.moc"
