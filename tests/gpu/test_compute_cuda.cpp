// The CUDA backend against the CPU backend on the same random and edge data (tests/support/backend_cases.h,
// shared with gpu_check): histogram counts and conversions exact, sums within 1e-9 relative. Skips (with the
// CUDA runtime's reason) without a device.
#include <QTest>

#include "backend_cases.h"
#include "ckptdoc/compute/backend.h"
#include "compute_compare.h"

using namespace ckptdoc;
using namespace ckptdoc::test;

class TestComputeCuda : public QObject {
  Q_OBJECT

  std::unique_ptr<Backend> gpu_, cpu_;
  std::vector<BackendCase> cases_ = backend_cases();

  void rows(const char* group) {
    QTest::addColumn<int>("index");
    for (size_t i = 0; i < cases_.size(); ++i)
      if (cases_[i].group == group) QTest::newRow(cases_[i].name.c_str()) << static_cast<int>(i);
  }
  void run_row() {
    QFETCH(int, index);
    CKPTDOC_EXPECT_SAME(cases_[static_cast<size_t>(index)].run(*gpu_, *cpu_));
  }

 private slots:
  void initTestCase() {
    std::string reason;
    if (!cuda_available(&reason)) QSKIP(("no CUDA device: " + reason).c_str());
    gpu_ = make_backend(DeviceKind::Cuda);
    cpu_ = make_cpu_backend();
    qInfo("%s vs %s", gpu_->description().c_str(), cpu_->description().c_str());
  }

  void divergence_matches_cpu_data() { rows("divergence"); }
  void divergence_matches_cpu() { run_row(); }
  void value_stats_match_cpu_data() { rows("value_stats"); }
  void value_stats_match_cpu() { run_row(); }
  void fragment_stats_match_cpu_data() { rows("fragment_stats"); }
  void fragment_stats_match_cpu() { run_row(); }
  void upcast_bit_exact_data() { rows("upcast"); }
  void upcast_bit_exact() { run_row(); }
  void downcast_bit_exact_data() { rows("downcast"); }
  void downcast_bit_exact() { run_row(); }
};

QTEST_GUILESS_MAIN(TestComputeCuda)
#include "test_compute_cuda.moc"
