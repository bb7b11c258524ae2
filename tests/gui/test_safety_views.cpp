// The desktop app on hostile and changing checkpoints: a model file whose pickle calls posix.system shows an
// unsafe-pickle card in the overview with file, record and callable; a rank file cut while the checkpoint is
// open makes the next analysis fail with "changed while being read" instead of killing the app.
#include <QLabel>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QtTest>
#include <filesystem>

#include "app_settings.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "findings_model.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "main_window.h"
#include "overview_view.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;
namespace fs = std::filesystem;

namespace {

bool openAndWait(MainWindow& w, const std::string& path) {
  QSignalSpy done(w.session(), &Session::analysisFinished);
  w.openPath(QString::fromStdString(path), true);
  return done.wait(120000);
}

// A copy of a real fixture whose model file gains an entry that torch.load would unpickle by calling
// posix.system('true') (written as a GLOBAL + REDUCE by ckptdoc's own pickler, as Python writes it).
std::string payload_checkpoint(const test::TempDir& dir) {
  const std::string ck = dir.file("ck");
  test::copy_tree(test::healthy_fixture("zero2_fp16_ws2"), ck);
  const std::string model = ck + "/global_step5/mp_rank_00_model_states.pt";
  Value root;
  {
    const TorchFile tf = TorchFile::open(model);
    root = tf.root.clone();
  }
  ObjectData o;
  o.module = "posix";
  o.name = "system";
  o.args = std::make_shared<Value>(Value::tuple({Value::str("true")}));
  root.set("payload", Value::object(std::move(o)));
  deepspeed::write_checkpoint_file(model + ".new", root);
  fs::rename(model + ".new", model);
  return ck;
}

}  // namespace

class TestSafetyViews : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    AppSettings().setDevice(DeviceKind::Cpu);
  }

  void unsafePickleShowsInTheOverview() {
    test::TempDir dir;
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, payload_checkpoint(dir)));
    const auto* m = w.findingsModel();
    int row = -1;
    for (int r = 0; r < m->count(); ++r)
      if (m->finding(r).code == "unsafe-pickle") row = r;
    QVERIFY(row >= 0);
    QCOMPARE(m->finding(row).severity, analysis::Severity::Error);
    QCOMPARE(m->finding(row).details.at("callable"), std::string("posix.system"));
    auto* card = w.overview()->findChild<QWidget*>("finding_unsafe-pickle");
    QVERIFY(card);
    auto* details = card->findChild<QLabel*>("findingDetails");
    QVERIFY(details);
    QVERIFY2(details->text().contains("posix.system") &&
                 details->text().contains("mp_rank_00_model_states.pt") && details->text().contains("REDUCE"),
             qPrintable(details->text()));
  }

  void rankFileCutWhileOpenFailsTheAnalysis() {
    test::TempDir dir;
    const std::string ck = dir.file("ck");
    test::copy_tree(test::healthy_fixture("zero2_fp16_ws2"), ck);
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, ck));
    const std::string victim = ck + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt";
    fs::resize_file(victim, 4096);
    QSignalSpy failed(w.session(), &Session::analysisFailed);
    w.reanalyse();
    QVERIFY(failed.wait(60000));
    const QString message = failed.first().at(1).toString();
    QVERIFY2(message.contains("changed while being read") &&
                 message.contains("zero_pp_rank_1_mp_rank_00_optim_states.pt"),
             qPrintable(message));
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestSafetyViews)
#include "test_safety_views.moc"
