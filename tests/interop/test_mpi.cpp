// The CPU-over-MPI path: `mpirun -np 2 ckptdoc diagnose` splits the rank files over two processes and must
// report exactly what one process reports.
#include <QtTest>
#include <filesystem>
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

  // The merged report of `np` processes equals one process's: findings, bytes, and every param's counts,
  // extremes and histograms (the packed all-reduce must put each number back where it came from).
  static void expect_same_report(const std::string& ckpt, int np, int exit_code) {
    const auto single = test::run_cli({"diagnose", "--json", "--device", "cpu", ckpt});
    CKPTDOC_EXPECT_EXIT(single, exit_code);
    const auto multi = test::run(mpirun(), {"-np", std::to_string(np), test::cli(), "diagnose", "--json", "--device",
                                            "cpu", ckpt});
    CKPTDOC_EXPECT_EXIT(multi, exit_code);
    const json a = json::parse(single.out), b = json::parse(multi.out);
    QVERIFY2(b["backend"].get<std::string>().find(std::to_string(np) + " MPI processes, merged by MPI") !=
                 std::string::npos,
             multi.out.c_str());
    QCOMPARE(a["findings"], b["findings"]);
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

  void twoProcessesReportWhatOneReports() {
    for (const char* fixture : {"zero2_fp16_ws2", "zero3_fp16_ws2", "bf16opt_zero1_ws2"})
      expect_same_report(test::deepspeed_fixture(fixture) + "/checkpoint", 2, 0);
  }

  // Three processes over five rank files (2, 2, 1), with NaN/Inf in one rank's moments and stale masters:
  // the findings name the same ranks and params as one process does.
  void unevenSplitKeepsFindingsAndRanks() {
    test::TempDir dir;
    for (const char* breakage : {"nan_in_exp_avg_sq", "stale_fp32"}) {
      const std::string ckpt = dir.file(breakage);
      CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", ckpt, "--stage", "1", "--dtype", "fp16", "--dp", "5", "--params",
                                         "200000", "--break", breakage}),
                          0);
      expect_same_report(ckpt, 3, 1);
    }
  }

  // --verify-checksums under MPI: each process checks its ranks' files; a bad file found by process 1 is
  // still named, with its record, in the report process 0 prints.
  void checksumFindingsCrossProcesses() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", ckpt, "--stage", "2", "--dtype", "bf16", "--dp", "4", "--params",
                                       "200000"}),
                        0);
    std::string victim;
    for (const auto& e : std::filesystem::recursive_directory_iterator(ckpt))
      if (e.path().filename().string().find("zero_pp_rank_3_") != std::string::npos) victim = e.path().string();
    QVERIFY(!victim.empty());
    test::flip_bits_in_first_data_record(victim, 17, 0x10);
    const auto single = test::run_cli({"diagnose", "--json", "--device", "cpu", "--verify-checksums", ckpt});
    CKPTDOC_EXPECT_EXIT(single, 1);
    const auto multi = test::run(mpirun(), {"-np", "2", test::cli(), "diagnose", "--json", "--device", "cpu",
                                            "--verify-checksums", ckpt});
    CKPTDOC_EXPECT_EXIT(multi, 1);
    const json a = json::parse(single.out), b = json::parse(multi.out);
    QCOMPARE(a["findings"], b["findings"]);
    QVERIFY2(multi.out.find("checksum-mismatch") != std::string::npos, multi.out.c_str());
    QVERIFY2(multi.out.find("zero_pp_rank_3_") != std::string::npos, multi.out.c_str());
  }
};

QTEST_APPLESS_MAIN(TestMpi)
#include "test_mpi.moc"
