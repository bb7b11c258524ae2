// NCCL as ckptdoc uses it: loaded with dlopen (so a CUDA build runs where libnccl is missing) and, on a GPU,
// the packed all-reduce of a scan's statistics. Without NCCL or a GPU the affected functions skip and say
// why.
#include <nccl.h>

#include <QTest>
#include <limits>
#include <string>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/compute/reduction.h"
#include "compute/cuda/nccl_exchanger.h"
#include "compute/cuda/nccl_loader.h"
#include "compute/cuda/nccl_reducer.h"

using namespace ckptdoc;

class TestNccl : public QObject {
  Q_OBJECT

 private slots:
  void loaderReportsVersionOrReason() {
    std::string why;
    const bool ok = cuda::nccl_loadable(&why);
    const std::string version = cuda::nccl_version();
    if (!ok) {
      QVERIFY(!why.empty());
      QCOMPARE(version, "not loadable: " + why);
      QSKIP(qPrintable(QString::fromStdString("NCCL not loadable: " + why)));
    }
    qInfo("NCCL %s (header %d.%d.%d)", version.c_str(), NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    QVERIFY2(version.rfind(std::to_string(NCCL_MAJOR) + ".", 0) == 0,
             version.c_str());  // same major as built
  }

  // One process, one GPU: the reduction is the identity, and every array (empty ones too) comes back intact.
  void oneRankReducerKeepsValues() {
    std::string why;
    if (!cuda_available(&why)) QSKIP(qPrintable(QString::fromStdString("no CUDA device: " + why)));
    if (!cuda::nccl_loadable(&why)) QSKIP(qPrintable(QString::fromStdString("NCCL not loadable: " + why)));
    int broadcasts = 0;
    auto r = cuda::make_nccl_reducer(0, 0, 1, [&](void*, size_t, int root) {
      QCOMPARE(root, 0);
      ++broadcasts;
    });
    QCOMPARE(broadcasts, 1);
    QVERIFY(r->name().find("NCCL") == 0);
    const double inf = std::numeric_limits<double>::infinity();
    ReductionArrays a;
    a.counts = {0, 1, ~uint64_t{0}, 123456789012345ull};
    a.sums = {1e-300, -2.5, 3e300};
    a.mins = {inf, -1.0};
    a.maxs = {};
    const ReductionArrays before = a;
    r->allreduce(a);
    r->allreduce(a);  // a second call reuses the device buffer
    QCOMPARE(a.counts, before.counts);
    QCOMPARE(a.sums, before.sums);
    QCOMPARE(a.mins, before.mins);
    QVERIFY(a.maxs.empty());
    ReductionArrays empty;
    r->allreduce(empty);
    QVERIFY(empty.counts.empty());
  }

  // The re-partition exchanger as one rank: a grouped send to itself returns every float's bits.
  void oneRankExchangerReturnsEveryFloat() {
    std::string why;
    if (!cuda_available(&why)) QSKIP(qPrintable(QString::fromStdString("no CUDA device: " + why)));
    if (!cuda::nccl_loadable(&why)) QSKIP(qPrintable(QString::fromStdString("NCCL not loadable: " + why)));
    auto x = cuda::make_nccl_exchanger(0, 0, 1, [](void*, size_t, int) {});
    QVERIFY(x->name().find("NCCL") == 0);
    std::vector<float> send(100'003), recv(send.size(), 0.0f);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(i) * -0.5f;
    x->alltoallv(send.data(), {send.size()}, recv.data(), {recv.size()});
    QVERIFY(send == recv);
    x->alltoallv(nullptr, {0}, nullptr, {0});  // an empty round is legal
  }
};

QTEST_APPLESS_MAIN(TestNccl)
#include "test_nccl.moc"
