// The desktop app opens a universal checkpoint (made by convert from a real DeepSpeed 0.12.6 checkpoint)
// through the same core open path: every param listed and compared with its 16-bit weight, no error finding,
// and the universal-specific findings shown.
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>

#include "app_settings.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "findings_model.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "main_window.h"
#include "param_table_model.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

class TestUniversalWindow : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    AppSettings().setDevice(DeviceKind::Cpu);
  }

  void opensAUniversalCheckpoint() {
    test::TempDir dir;
    const auto src = deepspeed::Checkpoint::open(test::healthy_fixture("zero2_fp16_ws2"));
    const auto converted = universal::convert_to_universal(*src, dir.file("universal"));
    QVERIFY(converted.verified());
    MainWindow w;
    w.show();
    QSignalSpy done(w.session(), &Session::analysisFinished);
    w.openPath(QString::fromStdString(dir.file("universal")), true);
    QVERIFY(done.wait(120000));
    QCOMPARE(w.paramModel()->rowCount(), 8);
    const auto* m = w.findingsModel();
    bool module_note = false;
    for (int r = 0; r < m->count(); ++r) {
      QVERIFY2(m->finding(r).severity != analysis::Severity::Error, m->finding(r).message.c_str());
      module_note = module_note || m->finding(r).code == "universal-module-not-loaded";
    }
    QVERIFY(module_note);  // the fixture's model has a buffer the universal loader does not restore
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestUniversalWindow)
#include "test_universal_window.moc"
