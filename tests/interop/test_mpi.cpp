// The CPU-over-MPI path: `mpirun -np 2 ckptdoc diagnose` splits the rank files over two processes and must
// report exactly what one process reports.
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <tuple>

#include "test_support.h"

using namespace ckptdoc;
using nlohmann::json;

// A `--json` run's report is on stdout. An mpirun that could not start its processes exits non-zero with
// nothing there, which an expected exit 1 (error findings) does not tell apart: say so with its stderr,
// not as a JSON parse error.
#define EXPECT_REPORT(r)                                                                       \
  QVERIFY2(!(r).out.empty(), qPrintable(QString("%1 printed no report (exit %2); stderr:\n%3") \
                                            .arg(#r)                                           \
                                            .arg((r).exit_code)                                \
                                            .arg(QString::fromStdString((r).err).right(4000))))

class TestMpi : public QObject {
  Q_OBJECT

  static std::string mpirun() {
    for (const char* p : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"})
      if (QFile::exists(p)) return p;
    return "";
  }

  // Relative paths of the regular files under `dir`, sorted.
  static std::vector<std::string> tree(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(std::filesystem::relative(e.path(), dir).string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static bool same_bytes(const std::string& a, const std::string& b) {
    return test::read_text(a) == test::read_text(b);
  }

  static std::vector<std::string> repartition_args(const std::string& in, const std::string& out, int n) {
    return {test::cli(),       "repair", in,  "--repartition", "--world-size",
            std::to_string(n), "-o",     out, "--device",      "cpu"};
  }

 private slots:
  void initTestCase() {
    if (mpirun().empty()) QSKIP("mpirun (Open MPI) is not installed");
    qputenv("OMPI_ALLOW_RUN_AS_ROOT", "1");  // CI runs as root
    qputenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    qputenv("OMPI_MCA_rmaps_base_oversubscribe", "1");
    // hwloc's GL plugin (libhwloc-plugins) opens every X display :0, :1, ... to look for GPUs; when the
    // private Xvfb of an ImGui test running beside this one goes away mid-query, Xlib's fatal IO error ends
    // mpirun with nothing on stdout ("fatal IO error 11 on X server :1"). This test needs no GPU topology.
    qputenv("HWLOC_COMPONENTS", "-gl");
  }

  // The merged report of `np` processes equals one process's: findings, bytes, and every param's counts,
  // extremes and histograms (the packed all-reduce must put each number back where it came from).
  static void expect_same_report(const std::string& ckpt, int np, int exit_code) {
    const auto single = test::run_cli({"diagnose", "--json", "--device", "cpu", ckpt});
    CKPTDOC_EXPECT_EXIT(single, exit_code);
    const auto multi = test::run(
        mpirun(), {"-np", std::to_string(np), test::cli(), "diagnose", "--json", "--device", "cpu", ckpt});
    CKPTDOC_EXPECT_EXIT(multi, exit_code);
    EXPECT_REPORT(single);
    EXPECT_REPORT(multi);
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
        for (const char* f : {"count", "exact_fraction", "max_abs", "nan", "zeros", "min", "max",
                              "ulp_histogram", "log10_abs_histogram"})
          if (x[k].contains(f))
            QVERIFY2(x[k][f] == y[k][f], (x["name"].get<std::string>() + " " + k + "." + f).c_str());
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
      CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", ckpt, "--stage", "1", "--dtype", "fp16", "--dp", "5",
                                         "--params", "200000", "--break", breakage}),
                          0);
      expect_same_report(ckpt, 3, 1);
    }
  }

  // --verify-checksums under MPI: each process checks its ranks' files; a bad file found by process 1 is
  // still named, with its record, in the report process 0 prints.
  void checksumFindingsCrossProcesses() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    CKPTDOC_EXPECT_EXIT(
        test::run_cli({"synth", ckpt, "--stage", "2", "--dtype", "bf16", "--dp", "4", "--params", "200000"}),
        0);
    std::string victim;
    for (const auto& e : std::filesystem::recursive_directory_iterator(ckpt))
      if (e.path().filename().string().find("zero_pp_rank_3_") != std::string::npos)
        victim = e.path().string();
    QVERIFY(!victim.empty());
    test::flip_bits_in_first_data_record(victim, 17, 0x10);
    const auto single = test::run_cli({"diagnose", "--json", "--device", "cpu", "--verify-checksums", ckpt});
    CKPTDOC_EXPECT_EXIT(single, 1);
    const auto multi = test::run(mpirun(), {"-np", "2", test::cli(), "diagnose", "--json", "--device", "cpu",
                                            "--verify-checksums", ckpt});
    CKPTDOC_EXPECT_EXIT(multi, 1);
    EXPECT_REPORT(single);
    EXPECT_REPORT(multi);
    const json a = json::parse(single.out), b = json::parse(multi.out);
    QCOMPARE(a["findings"], b["findings"]);
    QVERIFY2(multi.out.find("checksum-mismatch") != std::string::npos, multi.out.c_str());
    QVERIFY2(multi.out.find("zero_pp_rank_3_") != std::string::npos, multi.out.c_str());
  }

  // Re-partition under mpirun on shared storage: every process reads the old files it is given, slices
  // move between processes, each writes its new ranks; the result is one process's output, byte for byte,
  // for ZeRO-2 fp16, ZeRO-3, bf16 and BF16_Optimizer, growing and shrinking dp.
  void repartitionAcrossProcessesMatchesOneProcess() {
    struct Case {
      const char* fixture;
      int np, world;
    };
    for (const Case c : {Case{"zero2_fp16_ws2", 2, 3}, Case{"zero3_fp16_ws2", 3, 4},
                         Case{"zero2_bf16_ws2", 2, 1}, Case{"bf16opt_zero1_ws2", 3, 5}}) {
      test::TempDir dir;
      const std::string in = test::deepspeed_fixture(c.fixture) + "/checkpoint";
      const std::string one = dir.file("one"), many = dir.file("many");
      auto single = repartition_args(in, one, c.world);
      CKPTDOC_EXPECT_EXIT(test::run(single.front(), {single.begin() + 1, single.end()}), 0);
      std::vector<std::string> args{"-np", std::to_string(c.np)};
      for (const auto& a : repartition_args(in, many, c.world)) args.push_back(a);
      const auto r = test::run(mpirun(), args);
      CKPTDOC_EXPECT_EXIT(r, 0);
      QVERIFY2(
          r.out.find(std::to_string(c.np) + " processes, slices exchanged over MPI") != std::string::npos,
          r.out.c_str());
      QVERIFY2(r.out.find("on shared storage") != std::string::npos, r.out.c_str());
      QVERIFY2(r.out.find("Repair verified.") != std::string::npos, r.out.c_str());
      QCOMPARE(tree(many), tree(one));
      for (const auto& f : tree(one))
        QVERIFY2(same_bytes(one + "/" + f, many + "/" + f), (std::string(c.fixture) + " " + f).c_str());
    }
  }

  // Node-local storage (DeepSpeed's use_node_local_storage), played with mpirun's MPMD form: processes 0-1
  // see only folder A (old ranks 0-1), processes 2-3 only folder B (old ranks 2-3), and each pair writes its
  // own output folder. Together the two outputs are one process's output of the whole checkpoint.
  void repartitionOnNodeLocalStorage() {
    for (const char* stage : {"2", "3"}) {
      test::TempDir dir;
      const std::string whole = dir.file("whole");
      CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", whole, "--stage", stage, "--dtype", "bf16", "--dp", "4",
                                         "--params", "300000"}),
                          0);
      const std::string tag = test::read_text(whole + "/latest");
      const std::string a = dir.file("node_a"), b = dir.file("node_b");
      test::copy_tree(whole, a);
      test::copy_tree(whole, b);
      // Each node keeps the rank files its processes saved: ranks 0-1 on A, 2-3 on B.
      for (const auto& [node, gone] : {std::pair{a, std::string("[23]")}, std::pair{b, std::string("[01]")}})
        for (const auto& f : tree(node + "/" + tag))
          if (std::regex_search(f, std::regex("zero_pp_rank_" + gone + "_")))
            std::filesystem::remove(node + "/" + tag + "/" + f);
      const std::string one = dir.file("one"), out_a = dir.file("out_a"), out_b = dir.file("out_b");
      auto single = repartition_args(whole, one, 6);
      CKPTDOC_EXPECT_EXIT(test::run(single.front(), {single.begin() + 1, single.end()}), 0);
      std::vector<std::string> args{"-np", "2"};
      for (const auto& x : repartition_args(a, out_a, 6)) args.push_back(x);
      args.insert(args.end(), {":", "-np", "2"});
      for (const auto& x : repartition_args(b, out_b, 6)) args.push_back(x);
      const auto r = test::run(mpirun(), args);
      CKPTDOC_EXPECT_EXIT(r, 0);
      QVERIFY2(r.out.find("on its own storage") != std::string::npos, r.out.c_str());
      // Verified by a diagnosis that all 4 processes share (each reads the new ranks on its storage) and by
      // the loader invariants of each storage's files.
      // Clean: no error or warning (info findings such as the padding count may be listed).
      const auto verification = r.out.find("re-diagnosed by all 4 processes):");
      QVERIFY2(verification != std::string::npos &&
                   r.out.find("  0 error(s), 0 warning(s)", verification) != std::string::npos,
               r.out.substr(verification == std::string::npos ? 0 : verification).c_str());
      for (int p = 0; p < 4; ++p)
        QVERIFY2(r.out.find("[process " + std::to_string(p) + "] DeepSpeed loader invariants: all hold") !=
                     std::string::npos,
                 r.out.c_str());
      QVERIFY2(r.out.find("Repair verified.") != std::string::npos, r.out.c_str());
      // New ranks 0-2 are written by processes 0-1 (A), 3-5 by processes 2-3 (B).
      std::set<std::string> seen;
      for (const auto& [out, mine] :
           {std::pair{out_a, std::string("[012]")}, std::pair{out_b, std::string("[345]")}}) {
        for (const auto& f : tree(out)) {
          QVERIFY2(same_bytes(one + "/" + f, out + "/" + f), (out + "/" + f).c_str());
          if (f.find("zero_pp_rank_") != std::string::npos)
            QVERIFY2(std::regex_search(f, std::regex("zero_pp_rank_" + mine + "_")), (out + "/" + f).c_str());
          seen.insert(f);
        }
      }
      const auto want = tree(one);
      QCOMPARE(std::vector<std::string>(seen.begin(), seen.end()), want);
    }
  }

  // Splits a checkpoint's rank files over two "nodes": A keeps dp ranks `a_keeps`, B `b_keeps` (regex
  // character classes); every other file is on both, as DeepSpeed's node-local saving leaves them.
  static void split_over_nodes(const std::string& whole, const std::string& a, const std::string& b,
                               const std::string& a_keeps, const std::string& b_keeps) {
    const std::string tag = test::read_text(whole + "/latest");
    test::copy_tree(whole, a);
    test::copy_tree(whole, b);
    for (const auto& [node, keep] : {std::pair{a, a_keeps}, std::pair{b, b_keeps}})
      for (const auto& f : tree(node + "/" + tag))
        if (f.find("zero_pp_rank_") != std::string::npos &&
            !std::regex_search(f, std::regex("zero_pp_rank_" + keep + "_")))
          std::filesystem::remove(node + "/" + tag + "/" + f);
  }

  // diagnose under mpirun on node-local storage: each process reads the rank files its node holds, and the
  // merged report is the one a single process gives for the whole checkpoint (a rank on the other node is
  // not missing). A rank on neither node is reported missing, naming only that rank.
  void diagnoseOnNodeLocalStorage() {
    // ZeRO-3 model files hold no weights to compare masters with: break its moments instead.
    for (const auto& [stage, breakage, code] :
         {std::tuple{"2", "stale_fp32", "fp32-master"}, std::tuple{"3", "nan_in_exp_avg_sq", "nonfinite"}}) {
      test::TempDir dir;
      const std::string whole = dir.file("whole"), a = dir.file("node_a"), b = dir.file("node_b");
      CKPTDOC_EXPECT_EXIT(test::run_cli({"synth", whole, "--stage", stage, "--dtype", "fp16", "--dp", "4",
                                         "--params", "200000", "--break", breakage}),
                          0);
      split_over_nodes(whole, a, b, "[01]", "[23]");
      const auto single = test::run_cli({"diagnose", "--json", "--device", "cpu", whole});
      CKPTDOC_EXPECT_EXIT(single, 1);
      const auto multi =
          test::run(mpirun(), {"-np", "1", test::cli(), "diagnose", "--json", "--device", "cpu", a, ":",
                               "-np", "1", test::cli(), "diagnose", "--json", "--device", "cpu", b});
      CKPTDOC_EXPECT_EXIT(multi, 1);
      EXPECT_REPORT(single);
      EXPECT_REPORT(multi);
      const json x = json::parse(single.out), y = json::parse(multi.out);
      QCOMPARE(y["findings"], x["findings"]);
      QVERIFY2(multi.out.find(code) != std::string::npos, multi.out.c_str());
      QCOMPARE(y["bytes_scanned"], x["bytes_scanned"]);
      QCOMPARE(y["params"].size(), x["params"].size());
      for (size_t i = 0; i < x["params"].size(); ++i)
        QCOMPARE(y["params"][i]["per_rank"], x["params"][i]["per_rank"]);

      // Rank 3 on neither node (B keeps only rank 2): missing, and only it.
      const std::string c = dir.file("node_c"), d = dir.file("node_d");
      split_over_nodes(whole, c, d, "[01]", "[2]");
      const auto gap =
          test::run(mpirun(), {"-np", "1", test::cli(), "diagnose", "--json", "--device", "cpu", c, ":",
                               "-np", "1", test::cli(), "diagnose", "--json", "--device", "cpu", d});
      CKPTDOC_EXPECT_EXIT(gap, 1);
      bool named = false;
      EXPECT_REPORT(gap);
      const json gap_report = json::parse(gap.out);
      for (const auto& f : gap_report["findings"])
        if (f["code"] == "rank-file-missing") {
          QCOMPARE(f["ranks"], json::array({3}));
          named = true;
        }
      QVERIFY2(named, gap.out.c_str());
    }
  }

  // --force over earlier outputs on node-local storage, where node B fails after node A has published: a
  // directory fsync fails on B's processes (injected there only), at each of its calls in turn, the
  // publish's last. Every process stops, and each node keeps its earlier output byte for byte: A's new
  // output is taken back and its old one put back, as B's is. Nothing else is left beside them.
  void failedPublishOnOneNodeKeepsEveryEarlierOutput() {
    test::TempDir dir;
    const std::string whole = dir.file("whole"), a = dir.file("node_a"), b = dir.file("node_b");
    CKPTDOC_EXPECT_EXIT(
        test::run_cli({"synth", whole, "--stage", "2", "--dtype", "bf16", "--dp", "4", "--params", "300000"}),
        0);
    split_over_nodes(whole, a, b, "[01]", "[23]");
    const std::string out_a = dir.file("out_a"), out_b = dir.file("out_b");
    auto run_on_both = [&](int world, const std::string& fault_on_b) {
      std::vector<std::string> args{"-np", "2"};
      for (const auto& x : repartition_args(a, out_a, world)) args.push_back(x);
      args.insert(args.end(), {"--force", ":", "-np", "2", "env", "CKPTDOC_FAULT=" + fault_on_b});
      for (const auto& x : repartition_args(b, out_b, world)) args.push_back(x);
      args.push_back("--force");
      return test::run(mpirun(), args);
    };
    auto contents = [&] {
      std::map<std::string, std::string> files;
      for (const auto& out : {out_a, out_b}) {
        if (!std::filesystem::exists(out))
          files[out] = "(missing)";
        else
          for (const auto& f : tree(out)) files[out + "/" + f] = test::read_text(out + "/" + f);
      }
      return files;
    };
    CKPTDOC_EXPECT_EXIT(run_on_both(6, ""), 0);
    const auto before = contents();
    QVERIFY(before.size() > 4);
    const std::string publish_failed = dir.path() + ": fsync of directory";
    bool publish_seen = false;
    for (int call = 1; call < 50; ++call) {
      const auto r = run_on_both(5, "fail@" + std::to_string(call) + ":fsync_dir:EIO");
      if (r.exit_code == 0) break;
      const std::string at = "fsync_dir call " + std::to_string(call) + ": " + r.err;
      QVERIFY2(r.err.find("fsync of directory: Input/output error") != std::string::npos, at.c_str());
      publish_seen = publish_seen || r.err.find(publish_failed) != std::string::npos;
      QVERIFY2(contents() == before, ("an earlier output changed; " + at).c_str());
      QCOMPARE(test::files_in(dir.path()),
               (std::vector<std::string>{"node_a", "node_b", "out_a", "out_b", "whole"}));
    }
    QVERIFY2(publish_seen, "no injected failure hit B's publish");
  }

  // An old rank that no process can read: every process stops with the same error naming it, and no output
  // or partial folder is left on either storage.
  void repartitionRefusesARankNoProcessHas() {
    test::TempDir dir;
    const std::string a = dir.file("node_a");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", a);
    const std::string tag = test::read_text(a + "/latest");
    std::filesystem::remove(a + "/" + tag + "/zero_pp_rank_1_mp_rank_00_optim_states.pt");
    std::vector<std::string> args{"-np", "2"};
    for (const auto& x : repartition_args(a, dir.file("out"), 3)) args.push_back(x);
    const auto r = test::run(mpirun(), args);
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("old dp rank 1 is on no process") != std::string::npos, r.err.c_str());
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"node_a"});
    // Other repairs are not split over processes: a clear refusal, not two processes racing on one output.
    args = {"-np",
            "2",
            test::cli(),
            "repair",
            test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint",
            "--refresh-fp32",
            "-o",
            dir.file("out"),
            "--device",
            "cpu"};
    const auto refused = test::run(mpirun(), args);
    CKPTDOC_EXPECT_EXIT(refused, 2);
    QVERIFY2(
        refused.err.find("only --repartition --world-size runs across MPI processes") != std::string::npos,
        refused.err.c_str());
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"node_a"});
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestMpi)
#include "test_mpi.moc"
