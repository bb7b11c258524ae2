// The desktop app on checkpoints today's DeepSpeed wrote (0.19, and 0.18.4's layouts that differ): the window
// shows the findings `ckptdoc diagnose` gives for the same folder (code and severity, each as many times), a
// row for every param the report has, and, when no error was found, the CLI's verdict with what it rests on.
// The app and the CLI share the core, so a difference here is the view dropping or inventing something.
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <map>

#include "app_settings.h"
#include "findings_model.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "main_window.h"
#include "overview_view.h"
#include "param_table_model.h"
#include "realds_support.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;
namespace realds = ckptdoc::test::realds;

class TestRealdsApp : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    AppSettings().setDevice(DeviceKind::Cpu);
  }

  void windowAgreesWithDiagnose_data() {
    QTest::addColumn<QString>("name");
    for (const char* n :
         {"v019_z1_fp16_dp2", "v019_z2_bf16_dp2", "v019_z3_fp16_dp2", "v019_z2_fp16_dp8_tiny",
          "v019_z2_bf16_dp2_bf16_states", "v019_z2_fp16_dp2_legacy", "v019_bf16_z0_dp2",
          "v019_bf16_z0_fused_dp2", "v019_bf16opt_s1_dp2", "v019_ulysses_sp2", "v0184_ulysses_sp2",
          "v0184_bf16_z0_dp2", "v019_autotp_z1", "v019_par_tp", "v019_par_moe", "v019_par_pipe3d"})
      QTest::newRow(n) << QString(n);
  }
  void windowAgreesWithDiagnose() {
    REALDS_REQUIRE_DS("0.19");
    QFETCH(QString, name);
    const auto e = realds::checkpoint(name.toStdString());
    const auto cli = test::run_cli({"diagnose", "--json", "--device", "cpu", e.save_dir});
    QVERIFY2(cli.exit_code == 0 || cli.exit_code == 1, cli.err.c_str());
    const auto report = QJsonDocument::fromJson(QByteArray::fromStdString(cli.out)).object();
    std::map<std::string, int> want, got;
    for (const auto& f : report["findings"].toArray()) {
      const auto o = f.toObject();
      ++want[o["severity"].toString().toStdString() + " " + o["code"].toString().toStdString()];
    }

    MainWindow w;
    w.show();
    QSignalSpy done(w.session(), &Session::analysisFinished);
    w.openPath(QString::fromStdString(e.save_dir), true);
    QVERIFY2(done.wait(300000), "no analysis result within 300 s");
    const auto* m = w.findingsModel();
    for (int r = 0; r < m->count(); ++r)
      ++got[std::string(analysis::severity_name(m->finding(r).severity)) + " " + m->finding(r).code];
    QVERIFY2(got == want, qPrintable("window: " + QString::fromStdString([&] {
                                       std::string s;
                                       for (const auto& [k, v] : got)
                                         s += k + " x" + std::to_string(v) + "; ";
                                       return s;
                                     }()) +
                                     "\ndiagnose: " + QJsonDocument(report["findings"].toArray()).toJson()));
    QCOMPARE(w.paramModel()->rowCount(), static_cast<int>(report["params"].toArray().size()));
    QVERIFY(w.paramModel()->rowCount() > 0);

    const auto verdict = report["verdict"].toObject();
    auto* label = w.overview()->findChild<QLabel*>("noProblemsLabel");
    if (verdict["kind"].toString() == "problems") {
      QVERIFY(!label);
    } else {
      QVERIFY2(label, qPrintable(verdict["headline"].toString()));
      QVERIFY2(label->text().startsWith(verdict["headline"].toString() +
                                        " Checked: " + verdict["basis"].toString()),
               qPrintable(label->text() + "\n" + verdict["headline"].toString()));
    }
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestRealdsApp)
#include "test_realds_app.moc"
