// The desktop app's open path on Hugging Face model folders and weights files: a folder written by torch
// opens, its analysis lists the folder's finding and one param row per tensor; a Trainer checkpoint-N/ folder
// opens as the DeepSpeed checkpoint it holds. Exporting its NaN weights warns beside "Exported".
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>

#include "app_settings.h"
#include "ckptdoc/io/held_write_io.h"
#include "export_dialog.h"
#include "findings_model.h"
#include "gui_test_main.h"
#include "main_window.h"
#include "overview_view.h"
#include "param_table_model.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

bool openAndWait(MainWindow& w, const std::string& path) {
  QSignalSpy done(w.session(), &Session::analysisFinished);
  w.openPath(QString::fromStdString(path), true);
  return done.wait(120000);
}

std::string hf_folder(const test::TempDir& tmp, const std::string& kind) {
  const auto r =
      test::run_python(test::script("fixtures/make_hf_folder.py"), {tmp.file("m"), "--break", kind});
  if (r.exit_code != 0) throw std::runtime_error(r.err);
  return tmp.file("m");
}

}  // namespace

class TestWeightsWindow : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    AppSettings().setDevice(DeviceKind::Cpu);
  }

  void opensAHuggingFaceFolder() {
    test::TempDir tmp;
    const std::string dir = hf_folder(tmp, "nan");
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, dir));
    QCOMPARE(QString::fromStdString(w.session()->catalog()->kind), QString("hf-folder"));
    const auto* m = w.findingsModel();
    bool nonfinite = false;
    for (int r = 0; r < m->count(); ++r) nonfinite |= m->finding(r).code == "nonfinite-values";
    QVERIFY(nonfinite);
    QCOMPARE(w.paramModel()->rowCount(), 17);
  }

  // Exporting weights that hold NaN (written by torch): the dialog says so beside "Exported".
  void exportOfNaNWeightsWarns() {
    test::TempDir tmp;
    const std::string dir = hf_folder(tmp, "nan");
    MainWindow w;
    QVERIFY(openAndWait(w, dir));
    ExportDialog d(w.session());
    d.setOutputPath(QString::fromStdString(tmp.file("out.safetensors")));
    QSignalSpy exported(&d, &ExportDialog::exported);
    d.runButton()->click();
    QVERIFY(exported.wait(120000));
    const QString text = d.status()->text();
    QVERIFY2(text.contains("Exported") && text.contains("holds NaN or Inf values"), qPrintable(text));
  }

  // A DeepSpeed checkpoint's export (written by DeepSpeed, tests/fixtures/deepspeed/zero2_fp16_ws2) cancelled
  // while it runs: the dialog says what the sources' export says, in the same words, and both are true:
  // nothing is left beside the output's path.
  void exportCancelledSaysNothingWasWritten() {
    MainWindow w;
    QVERIFY(openAndWait(w, test::deepspeed_fixture("zero2_fp16_ws2")));
    test::TempDir tmp;
    ExportDialog d(w.session());
    d.setOutputPath(QString::fromStdString(tmp.file("out.safetensors")));
    HeldWriteIo io(/*hold_at=*/1, HeldWriteIo::HoldAt::OpenWrite);
    ScopedFileIo scoped(io);
    d.runButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(io.held(), 60000);
    QPushButton* cancel = nullptr;
    for (auto* b : d.findChildren<QPushButton*>())
      if (b->text() == QStringLiteral("Cancel")) cancel = b;
    QVERIFY(cancel);
    cancel->click();
    io.release();
    QTRY_VERIFY_WITH_TIMEOUT(d.runButton()->isEnabled(), 60000);
    QCOMPARE(d.status()->text(), QStringLiteral("Export cancelled; nothing was written."));
    QVERIFY(test::files_in(tmp.path()).empty());
  }

  void opensOneWeightsFile() {
    test::TempDir tmp;
    const std::string dir = hf_folder(tmp, "none");
    MainWindow w;
    QVERIFY(openAndWait(w, dir + "/model-00001-of-00003.safetensors"));
    QCOMPARE(QString::fromStdString(w.session()->catalog()->kind), QString("weights-file"));
    QCOMPARE(w.findingsModel()->count(), 0);
    QCOMPARE(w.paramModel()->rowCount(), 5);
    // It holds no optimizer state and was never partitioned: the Overview names no ZeRO stage.
    const auto* summary = w.overview()->findChild<QLabel*>(QStringLiteral("overviewSummary"));
    QVERIFY(summary);
    QVERIFY2(summary->text().contains(QStringLiteral(">Optimizer</td><td>none</td>")),
             qPrintable(summary->text()));
    QVERIFY2(!summary->text().contains(QStringLiteral("ZeRO")), qPrintable(summary->text()));
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestWeightsWindow)
#include "test_weights_window.moc"
