// The item models: each passes QAbstractItemModelTester (empty, filled, reset), sorts numerically and
// filters by substring or regular expression.
#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <QtTest>
#include <atomic>
#include <thread>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "findings_model.h"
#include "gui_fixtures.h"
#include "gui_test_main.h"
#include "jobs_model.h"
#include "param_table_model.h"
#include "session.h"

using namespace ckptdoc;
using namespace ckptdoc::gui;

namespace {

analysis::Report syntheticReport() {
  analysis::Report r;
  analysis::Finding e;
  e.code = "fp32-master-mismatch";
  e.severity = analysis::Severity::Error;
  e.message = "fp32 masters do not match the weights";
  e.params = {"a", "b"};
  e.ranks = {0, 1};
  e.repair = analysis::RepairKind::RefreshFp32;
  analysis::Finding w;
  w.code = "moments-zero";
  w.severity = analysis::Severity::Warning;
  w.message = "moments are zero";
  r.findings = {e, w};
  for (int i = 0; i < 5; ++i) {
    analysis::ParamReport p;
    p.name = "layers." + std::to_string(i) + (i % 2 ? ".attn.weight" : ".mlp.bias");
    p.shape = {4, i + 1};
    p.numel = 4 * (i + 1);
    p.lp_dtype = DType::F16;
    DivergenceStats d;
    d.count = static_cast<uint64_t>(p.numel);
    d.exact = static_cast<uint64_t>(p.numel - i);
    d.max_abs = 0.1 * i;
    p.lp_vs_fp32 = d;
    ValueStats v;
    v.count = static_cast<uint64_t>(p.numel);
    v.nan = static_cast<uint64_t>(i == 3);
    p.fp32 = v;
    p.exp_avg_sq = v;
    r.params.push_back(p);
  }
  return r;
}

}  // namespace

class TestModels : public QObject {
  Q_OBJECT
 private slots:
  void findingsModelPassesTester() {
    FindingsModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(m.rowCount(), 0);
    const auto r = syntheticReport();
    m.setReport(&r);
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.data(m.index(0, FindingsModel::Code), Qt::DisplayRole).toString(),
             QString("fp32-master-mismatch"));
    QCOMPARE(m.data(m.index(0, 0), FindingsModel::RepairRole).toInt(),
             int(analysis::RepairKind::RefreshFp32));
    QVERIFY(m.data(m.index(0, 0), Qt::BackgroundRole).isValid());
    m.clear();
    QCOMPARE(m.rowCount(), 0);
    m.setFindings(r.findings);  // what the session hands over
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.finding(1).code, std::string("moments-zero"));
  }

  // "score" was never explained. Its tooltip gives the formula, and the formula is what every row shows.
  void scoreIsExplainedAndTheExplanationHolds() {
    ParamTableModel m;
    const auto r = syntheticReport();
    m.setReport(nullptr, &r);
    const QString tip = m.headerData(ParamTableModel::Score, Qt::Horizontal, Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains("10 ×") && tip.contains("at most 100") && tip.contains("1000"), qPrintable(tip));
    for (int row = 0; row < m.rowCount(); ++row) {
      const auto* p = m.paramReport(row);
      QVERIFY(p);
      double want = 0;
      if (p->lp_vs_fp32 && p->lp_vs_fp32->count > 0)
        want = 10 * (1 - p->lp_vs_fp32->exact_fraction()) + std::min(p->lp_vs_fp32->rel_l2(), 100.0);
      for (const auto* s : {&p->lp, &p->fp32, &p->exp_avg, &p->exp_avg_sq})
        if (*s && (*s)->finite_count() != (*s)->count) want += 1000;
      QCOMPARE(p->severity_score(), want);
    }
  }

  void paramModelPassesTesterAndSortsNumerically() {
    ParamTableModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto r = syntheticReport();
    m.setReport(nullptr, &r);
    QCOMPARE(m.rowCount(), 5);
    QSortFilterProxyModel proxy;
    QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.setSourceModel(&m);
    proxy.setSortRole(ParamTableModel::SortRole);
    proxy.sort(ParamTableModel::MaxAbsDiff, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, ParamTableModel::Name).data().toString(), QString("layers.4.mlp.bias"));
    proxy.sort(ParamTableModel::NaNs, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, ParamTableModel::Name).data().toString(), QString("layers.3.attn.weight"));
    proxy.setFilterKeyColumn(ParamTableModel::Name);
    proxy.setFilterFixedString("attn");
    QCOMPARE(proxy.rowCount(), 2);
    proxy.setFilterRegularExpression(QRegularExpression("^layers\\.[0-2]\\."));
    QCOMPARE(proxy.rowCount(), 3);
    QCOMPARE(m.rowOf("layers.2.mlp.bias"), 2);
    QVERIFY(m.paramReport(2));
    m.clear();
    QCOMPARE(proxy.rowCount(), 0);
  }

  // The jobs table follows the session's jobs: rows appear with them (one running, one waiting behind it in
  // the same lane), progress cells change in place, and the rows go once the endings are delivered.
  void jobsModelPassesTesterAndFollowsTheJobs() {
    Session session;
    JobsModel m(&session);
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(m.rowCount(), 0);
    std::atomic<bool> release{false}, running{false};
    auto work = [&](session::JobQueue::Context& c) {
      c.progress().set_stage("counting", 10);
      running = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      c.progress().add(5);
      return 1;
    };
    auto& q = session.core().queue();
    auto first = q.submit<int>(session::JobKind::Other, "lane", "first", work);
    while (!running) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto second = q.submit<int>(session::JobKind::Other, "other", "second",
                                [](session::JobQueue::Context&) { return 2; });
    auto third = q.submit<int>(session::JobKind::Export, "lane", "third",
                               [](session::JobQueue::Context&) { return 3; });
    m.refresh();
    QCOMPARE(m.rowCount(), 3);
    QCOMPARE(m.index(0, JobsModel::Title).data().toString(), QString("first"));
    QCOMPARE(m.index(0, JobsModel::State).data().toString(), QString("running"));
    QCOMPARE(m.index(0, JobsModel::Stage).data().toString(), QString("counting"));
    QCOMPARE(m.index(2, JobsModel::Kind).data().toString(), QString("export"));
    m.refresh();  // same jobs: cells change in place
    QCOMPARE(m.rowCount(), 3);
    QCOMPARE(m.job(0), first);
    release = true;
    session.core().queue().wait_idle();
    session.pollNow();
    m.refresh();
    QCOMPARE(m.rowCount(), 0);
    QCOMPARE(first->state(), session::JobState::Superseded);  // `third` was submitted to its lane after it
    QCOMPARE(second->state(), session::JobState::Succeeded);
    QCOMPARE(third->state(), session::JobState::Succeeded);
  }

  void modelsOnRealFixturePassTester() {
    const auto ckpt = deepspeed::Checkpoint::open(test::healthy_fixture("zero2_fp16_ws2"));
    analysis::DiagnoseOptions o;
    o.device = DeviceKind::Cpu;
    const auto report = deepspeed::diagnose(*ckpt, o);
    ParamTableModel params;
    QAbstractItemModelTester t1(&params, QAbstractItemModelTester::FailureReportingMode::QtTest);
    params.setCatalog(&ckpt->catalog());
    QCOMPARE(params.rowCount(), 8);
    QVERIFY(!params.data(params.index(0, ParamTableModel::ExactFraction), Qt::DisplayRole).isValid());
    params.setReport(&ckpt->catalog(), &report);
    QCOMPARE(params.rowCount(), 8);
    for (int row = 0; row < params.rowCount(); ++row)
      for (int col = 0; col < params.columnCount(); ++col)
        (void)params.data(params.index(row, col), Qt::DisplayRole);
    FindingsModel findings;
    QAbstractItemModelTester t2(&findings, QAbstractItemModelTester::FailureReportingMode::QtTest);
    findings.setCatalogProblems(&ckpt->catalog());
    findings.setReport(&report);
    for (int row = 0; row < findings.rowCount(); ++row)
      QVERIFY(findings.finding(row).severity != analysis::Severity::Error);
  }
};

CKPTDOC_TEST_MAIN_WIDGETS(TestModels)
#include "test_models.moc"
