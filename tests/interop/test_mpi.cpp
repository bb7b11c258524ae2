// The CPU-over-MPI path: `mpirun -np 2 ckptdoc diagnose` splits the rank files over two processes and must
// report exactly what one process reports.
#include <QtTest>
#include <nlohmann/json.hpp>

#include "test_support.h"

using namespace ckptdoc;
using nlohmann::json;

class TestMpi : public QObject {
  Q_OBJECT

  static std::string mpirun() {
    for (const char* p : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"})
      if (QFile::exists(p)) return p;
    return "";
  }

 private slots:
  void initTestCase() {
    if (mpirun().empty()) QSKIP("mpirun (Open MPI) is not installed");
    qputenv("OMPI_ALLOW_RUN_AS_ROOT", "1");  // CI runs as root
    qputenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    qputenv("OMPI_MCA_rmaps_base_oversubscribe", "1");
  }

  void twoProcessesReportWhatOneReports() {
    for (const char* fixture : {"zero2_fp16_ws2", "zero3_fp16_ws2", "bf16opt_zero1_ws2"}) {
      const std::string ckpt = test::deepspeed_fixture(fixture) + "/checkpoint";
      const auto single = test::run_cli({"diagnose", "--json", "--device", "cpu", ckpt});
      CKPTDOC_EXPECT_EXIT(single, 0);
      const auto multi = test::run(mpirun(), {"-np", "2", test::cli(), "diagnose", "--json", "--device", "cpu", ckpt});
      CKPTDOC_EXPECT_EXIT(multi, 0);
      const json a = json::parse(single.out), b = json::parse(multi.out);
      QVERIFY2(b["backend"].get<std::string>().find("2 MPI processes") != std::string::npos, multi.out.c_str());
      QCOMPARE(a["findings"].size(), b["findings"].size());
      QCOMPARE(a["bytes_scanned"], b["bytes_scanned"]);
      QCOMPARE(a["params"].size(), b["params"].size());
      for (size_t i = 0; i < a["params"].size(); ++i) {
        const json& x = a["params"][i];
        const json& y = b["params"][i];
        QCOMPARE(x["name"], y["name"]);
        for (const char* k : {"lp_vs_fp32", "lp", "fp32", "exp_avg", "exp_avg_sq"}) {
          if (x[k].is_null()) {
            QVERIFY(y[k].is_null());
            continue;
          }
          for (const char* f : {"count", "exact_fraction", "max_abs", "nan", "zeros", "min", "max", "ulp_histogram",
                                "log10_abs_histogram"})
            if (x[k].contains(f)) QVERIFY2(x[k][f] == y[k][f], (x["name"].get<std::string>() + " " + k + "." + f).c_str());
        }
        QCOMPARE(x["per_rank"], y["per_rank"]);
      }
    }
  }
};

QTEST_APPLESS_MAIN(TestMpi)
#include "test_mpi.moc"
