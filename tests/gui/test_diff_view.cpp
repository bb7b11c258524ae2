// The Diff tab on real DeepSpeed checkpoints: a copy of zero2_fp16_ws2 with one fp32 master element moved by
// a known amount lists exactly that param as changed, with max |A−B| equal to the move and to what `ckptdoc
// diff --json` reports; a copy repaired with --refresh-fp32 lists exactly the fp32 masters as changed, with
// the CLI's numbers; the `what` selector, the tolerance and opening another checkpoint re-run the comparison;
// the model passes QAbstractItemModelTester and sorts numerically.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTableView>
#include <QtTest>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "app_settings.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "damage_support.h"
#include "diff_model.h"
#include "diff_view.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "main_window.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

std::string stripModule(std::string n) {
  while (n.rfind("module.", 0) == 0) n = n.substr(7);
  return n;
}

// Adds `delta` to element 0 of rank 0's fp32 partition of group 0 (the first element of the param at offset 0
// of that group) in place; returns the move as stored (float rounding) and that param's name.
std::pair<double, std::string> moveFirstMaster(const std::string& save_dir, float delta) {
  const std::string tag = save_dir + "/global_step5";
  const std::string path = test::optim_file_of(tag, 0);
  Value root = TorchFile::open(path).root;
  auto& groups =
      root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut();
  const Tensor& t = groups[0].as_tensor();
  const auto span = t.contiguous_bytes();
  std::vector<uint8_t> bytes(span.begin(), span.end());
  float before, after;
  std::memcpy(&before, bytes.data(), 4);
  after = before + delta;
  std::memcpy(bytes.data(), &after, 4);
  groups[0] = Value::tensor(Tensor::from_bytes(DType::F32, t.shape, std::move(bytes)));
  write_torch_file(path, root);
  const auto ckpt = deepspeed::Checkpoint::open(save_dir);
  std::string name;
  for (const auto& p : ckpt->catalog().groups.at(0).params)
    if (p.offset == 0) name = p.name;
  return {std::fabs(double(after) - double(before)), stripModule(name)};
}

bool openAndWait(MainWindow& w, const std::string& path) {
  QSignalSpy done(w.session(), &Session::opened);
  w.openPath(QString::fromStdString(path), true);
  return done.wait(120000);
}

bool compareAndWait(MainWindow& w, const std::string& other) {
  QSignalSpy done(w.diffView(), &DiffView::diffFinished);
  w.compareWith(QString::fromStdString(other));
  return done.wait(120000);
}

// name -> max_abs_diff of the tensors `ckptdoc diff --json` calls different; {} on failure.
std::map<QString, double> cliChanged(const std::string& a, const std::string& b,
                                     const std::string& what = "fp32") {
  const auto r = test::run_cli({"diff", a, b, "--what", what, "--json"});
  if (r.exit_code != 0 && r.exit_code != 1) {
    qWarning("ckptdoc diff: %s", r.err.c_str());
    return {};
  }
  const auto doc = QJsonDocument::fromJson(QByteArray::fromStdString(r.out));
  std::map<QString, double> out;
  for (const auto& v : doc.object().value("tensors").toArray()) {
    const auto o = v.toObject();
    const auto max_abs = o.value("max_abs_diff");  // "inf" where one side is NaN/Inf and the other not
    if (!o.value("equal").toBool())
      out[o.value("name").toString()] = max_abs.isString() ? HUGE_VAL : max_abs.toDouble();
  }
  return out;
}

// name -> max |A−B| of the Diff tab's rows with status "changed".
std::map<QString, double> appChanged(const DiffModel& m) {
  std::map<QString, double> out;
  for (int r = 0; r < m.rowCount(); ++r)
    if (m.status(r) == DiffModel::RowStatus::Changed) out[m.name(r)] = m.tensor(r)->max_abs;
  return out;
}

int countStatus(const DiffModel& m, DiffModel::RowStatus s) {
  int n = 0;
  for (int r = 0; r < m.rowCount(); ++r) n += m.status(r) == s;
  return n;
}

}  // namespace

class TestDiffView : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    test::use_private_settings();
    AppSettings().setDevice(DeviceKind::Cpu);
  }

  // Before a comparison the tab says what is missing: B when a source is open, not "Open a checkpoint".
  void promptNamesWhatIsMissing() {
    MainWindow w;
    QVERIFY(w.diffView()->sidesText().startsWith("Open a checkpoint"));
    const std::string healthy = test::healthy_fixture("zero2_fp16_ws2");
    QVERIFY(openAndWait(w, healthy));
    const QString text = w.diffView()->sidesText();
    QVERIFY2(!text.contains("Open a checkpoint") && text.contains("Compare with"), qPrintable(text));
    QVERIFY2(text.contains(w.session()->path()), qPrintable(text));
  }

  void oneMovedMasterIsTheOnlyChangedTensor() {
    test::TempDir dir;
    const std::string healthy = test::healthy_fixture("zero2_fp16_ws2");
    const std::string moved = dir.file("moved");
    test::copy_tree(healthy, moved);
    const auto [delta, param] = moveFirstMaster(moved, 0.25f);
    QVERIFY(!param.empty());
    QVERIFY(delta > 0.2);

    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, healthy));
    QVERIFY(compareAndWait(w, moved));
    const auto* m = w.diffView()->model();
    QVERIFY2(m->rowCount() > 1, qPrintable(w.diffView()->summaryText()));
    // Exactly the moved param is changed, by exactly the move; everything else is equal and nothing was
    // added, removed or reshaped.
    const auto changed = appChanged(*m);
    QCOMPARE(changed.size(), size_t{1});
    QCOMPARE(changed.begin()->first, QString::fromStdString(param));
    QCOMPARE(changed.begin()->second, delta);
    QCOMPARE(countStatus(*m, DiffModel::RowStatus::Equal), m->rowCount() - 1);
    QCOMPARE(m->status(0), DiffModel::RowStatus::Changed);  // worst first
    const auto* t = m->tensor(0);
    QCOMPARE(t->exact, t->numel - 1);
    // The CLI says the same for the same pair.
    const auto cli = cliChanged(healthy, moved);
    QVERIFY(cli == changed);
    // The selected row shows its numbers and a histogram: one element, with A < B (B was moved up).
    QCOMPARE(w.diffView()->table()->currentIndex().row(), 0);
    QVERIFY(w.diffView()->detailsText().contains(QString::fromStdString(param)));
    QVERIFY(t->histogram);
    QCOMPARE(t->histogram->below.total(), uint64_t{1});
    QCOMPARE(t->histogram->above.zeros, t->numel - 1);

    // Adam moments were not touched: exp_avg compares equal.
    QSignalSpy again(w.diffView(), &DiffView::diffFinished);
    w.diffView()->setWhat(analysis::DiffWhat::ExpAvg);
    QVERIFY(w.diffView()->running());
    QVERIFY(again.wait(120000));
    QVERIFY(appChanged(*m).empty());
    QVERIFY(m->rowCount() > 0);
    QVERIFY(w.diffView()->summaryText().startsWith("equal"));

    // Back to fp32 with a tolerance above the move: every value is within it (still not exactly equal).
    w.diffView()->setWhat(analysis::DiffWhat::Fp32);
    QVERIFY(again.wait(120000));
    QCOMPARE(appChanged(*m).size(), size_t{1});
    w.diffView()->setTolerance(0.5, 0);
    QVERIFY(again.wait(120000));
    QVERIFY(appChanged(*m).empty());
    const int row = m->rowOf(QString::fromStdString(param));
    QVERIFY(row >= 0);
    QCOMPARE(m->tensor(row)->exact, m->tensor(row)->numel - 1);
    QCOMPARE(m->tensor(row)->close, m->tensor(row)->numel);
    // Typing a tolerance below the move in the field (and Enter) compares again; leaving a field unchanged
    // does not.
    auto* atol = w.diffView()->atolEdit();
    atol->selectAll();
    QTest::keyClicks(atol, "0.1");
    QTest::keyClick(atol, Qt::Key_Return);
    QVERIFY(w.diffView()->running());
    QVERIFY(again.wait(120000));
    QCOMPARE(appChanged(*m).size(), size_t{1});
    const auto last = w.diffView()->job();
    atol->setFocus();
    QTest::keyClick(atol, Qt::Key_Return);
    QCOMPARE(w.diffView()->job(), last);
  }

  void refreshFp32RepairMatchesTheCli() {
    test::TempDir dir;
    const std::string healthy = test::healthy_fixture("zero2_fp16_ws2");
    const std::string repaired = dir.file("refreshed");
    const auto r = test::run_cli({"repair", healthy, "-o", repaired, "--refresh-fp32", "--device", "cpu"});
    QVERIFY2(r.exit_code == 0, (r.out + r.err).c_str());
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, healthy));
    QVERIFY(compareAndWait(w, repaired));
    const auto app = appChanged(*w.diffView()->model());
    const auto cli = cliChanged(healthy, repaired);
    QVERIFY(!cli.empty());  // fp32 masters differ from their fp16 weights
    QCOMPARE(app.size(), cli.size());
    for (const auto& [name, max_abs] : cli) {
      QVERIFY2(app.count(name), qPrintable(name));
      QCOMPARE(app.at(name), max_abs);
    }
    // Every changed tensor is a trainable param (the masters), nothing else.
    const auto* catalog = w.session()->catalog();
    std::set<QString> trainable;
    for (const auto& g : catalog->groups)
      for (const auto& p : g.params) trainable.insert(QString::fromStdString(stripModule(p.name)));
    for (const auto& [name, _] : app) QVERIFY2(trainable.count(name), qPrintable(name));
    QCOMPARE(app.size(), trainable.size());  // every master was refreshed from its (rounded) 16-bit weight
    // Each tensor's histogram counts every element once: equal ones as zeros, the rest on their side.
    const auto* m = w.diffView()->model();
    for (int r = 0; r < m->rowCount(); ++r) {
      const auto* t = m->tensor(r);
      QVERIFY(t && t->histogram);
      QCOMPARE(t->histogram->above.total() + t->histogram->below.total(), t->numel);
      QCOMPARE(t->histogram->above.zeros, t->exact);
      QCOMPARE(t->histogram->below.zeros, uint64_t{0});
    }
  }

  void modelPassesTheTesterAndSortsNumerically() {
    test::TempDir dir;
    const std::string healthy = test::healthy_fixture("zero2_fp16_ws2");
    const std::string stale = test::make_stale_masters_checkpoint(dir);
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, healthy));
    auto* m = w.diffView()->model();
    QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester proxyTester(w.diffView()->proxy(),
                                         QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(compareAndWait(w, stale));
    QVERIFY(m->rowCount() > 2);
    QCOMPARE(m->columnCount(), int(DiffModel::ColumnCount));
    auto* proxy = w.diffView()->proxy();
    proxy->sort(DiffModel::MaxAbsDiff, Qt::DescendingOrder);
    for (int r = 1; r < proxy->rowCount(); ++r)
      QVERIFY(proxy->index(r - 1, DiffModel::MaxAbsDiff).data(DiffModel::SortRole).toDouble() >=
              proxy->index(r, DiffModel::MaxAbsDiff).data(DiffModel::SortRole).toDouble());
    w.diffView()->model()->clear();
    QCOMPARE(proxy->rowCount(), 0);
  }

  void openingAnotherAComparesItWithTheSameB() {
    test::TempDir dir;
    const std::string healthy = test::healthy_fixture("zero2_fp16_ws2");
    const std::string moved = dir.file("moved");
    test::copy_tree(healthy, moved);
    moveFirstMaster(moved, 0.25f);
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, healthy));
    QVERIFY(compareAndWait(w, moved));
    QCOMPARE(appChanged(*w.diffView()->model()).size(), size_t{1});
    QSignalSpy again(w.diffView(), &DiffView::diffFinished);
    w.openPath(QString::fromStdString(moved), true);  // A is now B itself
    QVERIFY(again.wait(120000));
    QVERIFY(appChanged(*w.diffView()->model()).empty());
    QVERIFY(w.diffView()->summaryText().startsWith("equal"));
    QVERIFY(
        QString::fromStdString(w.diffView()->model()->result()->a).contains(QString::fromStdString(moved)));
  }

  // At the size the app opens at, every column of the table is on screen: the name column takes what the
  // numbers leave and elides (its tooltip has the whole name). Sized to its contents, a long name pushed
  // "Within tol." out of the view.
  void everyColumnFitsTheDefaultWindow() {
    test::TempDir dir;
    const std::string file = test::make_long_names_weights(dir);
    MainWindow w;
    w.resize(1280, 800);
    w.show();
    QVERIFY(openAndWait(w, file));
    QVERIFY(compareAndWait(w, file));
    w.showTab("diff");
    QCoreApplication::processEvents();
    const QTableView* t = w.diffView()->table();
    const auto* header = t->horizontalHeader();
    const int last = DiffModel::CloseFraction;
    const int right = header->sectionViewportPosition(last) + header->sectionSize(last);
    qInfo("table viewport %d px; 'Within tol.' ends at %d px; name column %d px", t->viewport()->width(),
          right, header->sectionSize(DiffModel::Name));
    QVERIFY2(right <= t->viewport()->width(),
             qPrintable(QString("'Within tol.' ends at %1 px of %2").arg(right).arg(t->viewport()->width())));
    // The name column is never squeezed to nothing, and a cut name is whole in its tooltip.
    QVERIFY(header->sectionSize(DiffModel::Name) >= header->minimumSectionSize());
    const auto* m = w.diffView()->model();
    QVERIFY(m->rowCount() > 0);
    QCOMPARE(m->data(m->index(0, DiffModel::Name), Qt::ToolTipRole).toString(), m->name(0));
  }

  // A PyTorch DCP folder open in the app (the Storage tab's source) is compared by its weights, as `ckptdoc
  // diff` compares it: torch's own FSDP2 save against its diverged run (NaN, Inf, a skipped step) lists the
  // tensors and the max |A−B| the CLI reports, and against itself is equal. main refused: "no checkpoint is
  // open".
  void dcpFolderIsComparedByItsWeights() {
    const std::string a = test::fixtures_dir() + "/dcp/fsdp2_ws2";
    const std::string b = test::fixtures_dir() + "/dcp/fsdp2_ws2_diverged";
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, a));
    QVERIFY(!w.session()->sharedCatalog());  // opened as its storage map
    QVERIFY(compareAndWait(w, b));
    const auto cli = cliChanged(a, b);
    QCOMPARE(cli.size(), size_t{5});
    const auto app = appChanged(*w.diffView()->model());
    QCOMPARE(app.size(), cli.size());
    for (const auto& [name, max_abs] : cli) {
      QVERIFY2(app.count(name), qPrintable(name));
      QCOMPARE(app.at(name), max_abs);
    }
    QVERIFY(compareAndWait(w, a));
    QVERIFY(appChanged(*w.diffView()->model()).empty());
    QVERIFY(w.diffView()->summaryText().startsWith("equal"));
  }

  void badSecondSourceSaysWhy() {
    test::TempDir dir;
    MainWindow w;
    w.show();
    QVERIFY(openAndWait(w, test::healthy_fixture("zero2_fp16_ws2")));
    QSignalSpy failed(w.diffView(), &DiffView::diffFailed);
    w.compareWith(QString::fromStdString(dir.file("missing")));
    QVERIFY(failed.wait(60000));
    QVERIFY(w.diffView()->errorText().contains("missing"));
    QCOMPARE(w.diffView()->model()->rowCount(), 0);
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestDiffView)
#include "test_diff_view.moc"
