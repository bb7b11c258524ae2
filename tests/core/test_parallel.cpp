// The shared worker pool (parallel.h): every index and every worker id runs exactly once, from any number of
// callers at once, nested inside another loop's body, with more workers than the pool has threads; the first
// exception comes back to the caller and stops the loop.
#include <QTest>
#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ckptdoc/parallel.h"
#include "test_support.h"

using namespace ckptdoc;

class TestParallel : public QObject {
  Q_OBJECT

 private slots:
  void everyIndexOnce() {
    for (unsigned workers : {0u, 1u, 2u, 7u}) {
      std::vector<std::atomic<int>> seen(10007);
      std::vector<std::atomic<int>> by_worker(64);
      parallel_for(seen.size(), workers, [&](size_t i, unsigned w) {
        seen[i].fetch_add(1);
        by_worker[w].fetch_add(1);
      });
      for (size_t i = 0; i < seen.size(); ++i) QCOMPARE(seen[i].load(), 1);
      const unsigned used = workers ? workers : default_workers();
      for (unsigned w = used; w < by_worker.size(); ++w)
        QCOMPARE(by_worker[w].load(), 0);  // ids below `workers`
    }
    parallel_for(0, 4, [](size_t, unsigned) { QFAIL("no index in an empty range"); });
  }

  // Work pinned to a worker id (the scan's devices) runs even where the pool has fewer threads than ids: the
  // caller takes the ids nobody started.
  void everyWorkerIdOnceEvenBeyondThePool() {
    std::vector<std::atomic<int>> ran(200);
    run_on_workers(200, [&](unsigned w) { ran[w].fetch_add(1); });
    for (size_t w = 0; w < ran.size(); ++w) QCOMPARE(ran[w].load(), 1);
  }

  // Loops inside loops and loops from several threads at once all finish (a deadlock would hang until ctest's
  // timeout) and count every element once.
  void nestedAndConcurrentCallsFinish() {
    std::atomic<size_t> total{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c)
      callers.emplace_back([&] {
        parallel_for(16, 4, [&](size_t, unsigned) {
          parallel_for(100, 4, [&](size_t, unsigned) { total.fetch_add(1); });
        });
      });
    for (auto& t : callers) t.join();
    QCOMPARE(total.load(), size_t{4 * 16 * 100});
  }

  // The exception reaches the caller after every worker stopped; no index runs twice and the loop stops
  // early.
  void firstExceptionIsRethrownAndStopsTheLoop() {
    std::vector<std::atomic<int>> seen(100000);
    bool thrown = false;
    try {
      parallel_for(seen.size(), 4, [&](size_t i, unsigned) {
        seen[i].fetch_add(1);
        if (i == 10) throw std::runtime_error("index 10");
      });
    } catch (const std::runtime_error& e) {
      thrown = std::string(e.what()) == "index 10";
    }
    QVERIFY(thrown);
    size_t ran = 0;
    for (auto& s : seen) {
      QVERIFY(s.load() <= 1);
      ran += static_cast<size_t>(s.load());
    }
    QVERIFY2(ran < seen.size(), "the loop went on after the exception");
    // The pool is still usable afterwards.
    std::atomic<int> after{0};
    parallel_for(1000, 4, [&](size_t, unsigned) { after.fetch_add(1); });
    QCOMPARE(after.load(), 1000);
  }
};

CKPTDOC_TEST_MAIN(TestParallel)
#include "test_parallel.moc"
