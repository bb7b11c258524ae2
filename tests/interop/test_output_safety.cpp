// Nothing a user owns is written, replaced or deleted unless ckptdoc wrote it (issue "Nothing lost, part
// II"): a `latest` or --tag that leaves the save folder is never followed; export never writes over its input
// or over an existing file without --force; --force replaces only what DeepSpeed or ckptdoc wrote, at any
// depth; of two writers racing for one output, the second to finish says it lost and replaces nothing; what a
// killed writer left is removed by the next run. Each case on a copy of a committed real DeepSpeed
// checkpoint.
#include <QProcess>
#include <QtTest>
#include <csignal>
#include <filesystem>
#include <thread>

#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

// A copy of the real ZeRO-2 fp16 dp2 checkpoint at `to` (its save folder: `latest` + global_step5/).
std::string real_checkpoint(const std::string& to) {
  test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", to);
  return to;
}

// Every file under `dir` with its bytes, to prove a folder was left exactly as it was.
std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = test::read_text(e.path().string());
  return files;
}

bool mentions(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

class TestOutputSafety : public QObject {
  Q_OBJECT

 private slots:
  // `latest` holding `../other/global_step5` made repair rewrite the other folder (the input!) and inspect
  // open
  // `/etc`. Now every command refuses, naming the file and what it holds, and nothing is written anywhere.
  void latestThatLeavesTheSaveFolderIsNeverFollowed() {
    test::TempDir dir;
    const std::string ck = real_checkpoint(dir.file("ck"));
    test::copy_tree(ck, dir.file("other"));
    const auto other_before = contents(dir.file("other"));
    for (const std::string target : {"../other/global_step5", "../../../../etc", "/etc", ".."}) {
      test::write_text(ck + "/latest", target + "\n");
      for (const std::vector<std::string>& args :
           {std::vector<std::string>{"repair", ck, "-o", dir.file("out"), "--refresh-fp32", "--device",
                                     "cpu"},
            std::vector<std::string>{"inspect", ck}, std::vector<std::string>{"diagnose", ck},
            std::vector<std::string>{"export", ck, "-o", dir.file("w.safetensors")},
            std::vector<std::string>{"convert", ck, "-o", dir.file("u"), "--to", "universal"}}) {
        const auto r = test::run_cli(args);
        const std::string what = args[0] + " with latest = " + target + "\n" + r.err;
        QVERIFY2(r.exit_code == 2, what.c_str());
        QVERIFY2(mentions(r.err, ck + "/latest") && mentions(r.err, "'" + target + "'"), what.c_str());
        QVERIFY2(mentions(r.err, "global_step5"), what.c_str());  // the tags that are there
      }
      QVERIFY(!fs::exists(dir.file("out")) && !fs::exists(dir.file("w.safetensors")) &&
              !fs::exists(dir.file("u")));
      QVERIFY(contents(dir.file("other")) == other_before);
    }
    // The same as --tag.
    test::write_text(ck + "/latest", "global_step5");
    for (const std::string command : {"inspect", "diagnose", "export"}) {
      std::vector<std::string> args{command, ck, "--tag", "../other/global_step5"};
      if (command == "export") args.insert(args.end(), {"-o", dir.file("w.safetensors")});
      const auto r = test::run_cli(args);
      CKPTDOC_EXPECT_EXIT(r, 2);
      QVERIFY2(mentions(r.err, "not a path"), r.err.c_str());
    }
    QVERIFY(!fs::exists(dir.file("w.safetensors")));
    QVERIFY(contents(dir.file("other")) == other_before);
  }

  // `export ck -o ck/global_step5/mp_rank_00_model_states.pt` replaced the input's model file (exit 0), and
  // any existing file was replaced without --force.
  void exportNeverWritesOverItsInputOrAnExistingFile() {
    test::TempDir dir;
    const std::string ck = real_checkpoint(dir.file("ck"));
    const auto before = contents(ck);
    const std::string model = ck + "/global_step5/mp_rank_00_model_states.pt";
    for (const std::string format : {"torch", "safetensors", "hdf5"}) {
      const auto r = test::run_cli({"export", ck, "-o", model, "--format", format});
      CKPTDOC_EXPECT_EXIT(r, 2);
      QVERIFY2(mentions(r.err, "reads"), r.err.c_str());
    }
    // A link to an input file is the input file.
    fs::create_symlink(model, dir.file("link.pt"));
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ck, "-o", dir.file("link.pt")}), 2);
    // New files inside the tag folder, and shards written into it.
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ck, "-o", ck + "/global_step5/w.safetensors"}), 2);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ck, "-o", ck + "/global_step5", "--max-shard-size", "1MB"}),
                        2);
    QVERIFY(contents(ck) == before);

    // Somebody's file: refused without --force, replaced with it.
    for (const std::string name : {"mine.safetensors", "mine.pt", "mine.h5"}) {
      const std::string mine = dir.file(name);
      test::write_text(mine, "keep me");
      auto r = test::run_cli({"export", ck, "-o", mine});
      CKPTDOC_EXPECT_EXIT(r, 2);
      QVERIFY2(mentions(r.err, "--force"), r.err.c_str());
      QCOMPARE(test::read_text(mine), std::string("keep me"));
      CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ck, "-o", mine, "--force"}), 0);
      QVERIFY(test::read_text(mine) != "keep me");
    }
    // A folder named as a single-file output: said in words (it used to be "rename: Is a directory").
    fs::create_directories(dir.file("folder"));
    const auto r = test::run_cli({"export", ck, "-o", dir.file("folder")});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, "is a folder"), r.err.c_str());
    QVERIFY(contents(ck) == before);
  }

  // OUT holding a checkpoint plus someone's notes.txt and tb/ inside the tag folder: `repair --force` deleted
  // them (only the top level was checked). Now refused, naming the file, and nothing is touched.
  void forceNeverDeletesWhatDeepSpeedDidNotWrite() {
    test::TempDir dir;
    const std::string ck = real_checkpoint(dir.file("ck"));
    const std::string out = dir.file("out");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", ck, "-o", out, "--refresh-fp32", "--device", "cpu"}), 0);
    test::write_text(out + "/global_step5/notes.txt", "my notes");
    fs::create_directories(out + "/global_step5/tb");
    test::write_text(out + "/global_step5/tb/events.out", "events");
    const auto before = contents(out);
    auto r = test::run_cli({"repair", ck, "-o", out, "--refresh-fp32", "--device", "cpu", "--force"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, "global_step5/notes.txt"), r.err.c_str());
    QVERIFY(contents(out) == before);
    r = test::run_cli({"convert", ck, "-o", out, "--to", "universal", "--force"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY(contents(out) == before);

    // A universal output with a stray file deep in zero/: the same.
    const std::string u = dir.file("u");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"convert", ck, "-o", u, "--to", "universal", "-q"}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"convert", ck, "-o", u, "--to", "universal", "-q", "--force"}), 0);
    fs::path param_dir;
    for (const auto& e : fs::directory_iterator(u + "/global_step5_universal/zero"))
      if (e.is_directory()) param_dir = e.path();
    test::write_text((param_dir / "README").string(), "mine");
    r = test::run_cli({"convert", ck, "-o", u, "--to", "universal", "-q", "--force"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, "README"), r.err.c_str());
    QCOMPARE(test::read_text((param_dir / "README").string()), std::string("mine"));
  }

  // Two repairs into one new OUT: both said "Repair verified", OUT held one of them. Now the writer stopped
  // before its publish, while the other publishes, says it lost (exit 2) and the other's output stays whole.
  void theSecondWriterToPublishLosesAndSaysSo() {
    test::TempDir dir;
    const std::string ck = real_checkpoint(dir.file("ck"));
    const std::string out = dir.file("out");
    int raced = 0;
    for (int attempt = 0; attempt < 5 && raced == 0; ++attempt) {
      fs::remove_all(out);
      QProcess first;
      first.start(QString::fromStdString(test::cli()),
                  {"repair", QString::fromStdString(ck), "-o", QString::fromStdString(out), "--refresh-fp32",
                   "--device", "cpu"});
      QVERIFY(first.waitForStarted());
      const auto pid = static_cast<pid_t>(first.processId());
      const std::string partial = out + ".ckptdoc-partial-" + std::to_string(pid);
      bool stopped = false;
      for (int i = 0; i < 200000 && first.state() == QProcess::Running; ++i) {
        if (fs::exists(partial)) {
          ::kill(pid, SIGSTOP);
          stopped = fs::exists(partial) && !fs::exists(out);  // still before its publish
          if (!stopped) ::kill(pid, SIGCONT);
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      if (stopped) {
        const auto second = test::run_cli({"repair", ck, "-o", out, "--drop-optimizer", "--device", "cpu"});
        CKPTDOC_EXPECT_EXIT(second, 0);
        ::kill(pid, SIGCONT);
      }
      QVERIFY(first.waitForFinished(300000));
      if (!stopped) continue;
      ++raced;
      const std::string err = first.readAllStandardError().toStdString();
      QVERIFY2(first.exitCode() == 2, err.c_str());
      QVERIFY2(mentions(err, "another process published"), err.c_str());
      QVERIFY2(!fs::exists(partial), "the loser's partial folder stays behind");
      // OUT is the second writer's: --drop-optimizer wrote no optimizer files.
      QVERIFY(fs::exists(out + "/global_step5/mp_rank_00_model_states.pt"));
      QVERIFY(!fs::exists(out + "/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt"));
      CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", out}), 0);
    }
    QVERIFY2(raced > 0, "the first writer was never stopped before its publish");
  }

  // kill -9 left "<out>.ckptdoc-partial-<pid>" folders and "-tmp-<pid>" files that no run removed. The next
  // writer of that output removes those whose process is gone; a live process's stay.
  void leftoversOfAKilledWriterAreRemovedByTheNextRun() {
    test::TempDir dir;
    const std::string ck = real_checkpoint(dir.file("ck"));
    pid_t dead = 4194000;
    while (dead > 300000 && ::kill(dead, 0) == 0) --dead;  // an id no process has now
    const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(5);
    auto leave = [&](const std::string& path, bool folder) {
      if (folder) {
        fs::create_directories(path + "/global_step5");
        test::write_text(path + "/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt", "half");
      } else {
        test::write_text(path, "half");
      }
      fs::last_write_time(path, old);
    };
    const std::string out = dir.file("out"), w = dir.file("w.safetensors");
    const std::string dead_partial = out + ".ckptdoc-partial-" + std::to_string(dead);
    const std::string live_partial = out + ".ckptdoc-partial-" + std::to_string(::getpid());
    const std::string dead_tmp = w + ".ckptdoc-tmp-" + std::to_string(dead);
    const std::string foreign = out + ".ckptdoc-partial-notapid";
    leave(dead_partial, true);
    leave(live_partial, true);
    leave(dead_tmp, false);
    leave(foreign, false);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", ck, "-o", out, "--refresh-fp32", "--device", "cpu"}), 0);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", ck, "-o", w}), 0);
    QVERIFY(!fs::exists(dead_partial));
    QVERIFY(!fs::exists(dead_tmp));
    QVERIFY(fs::exists(live_partial));  // its writer (this process) still runs
    QVERIFY(fs::exists(foreign));       // not a name ckptdoc gives
  }

  // A writer replacing OUT under --force moves it aside ("OUT.ckptdoc-replaced-<pid>") and renames its new
  // output in. Killed between the two, it left no OUT and the only copy of the old one aside, which the next
  // run deleted as a dead writer's leftover. Now the next run puts it back first: without --force it refuses
  // to replace it, with --force it replaces it, and nothing is left aside either way.
  void anOutputMovedAsideByAKilledWriterComesBack() {
    test::TempDir dir;
    const std::string ck = real_checkpoint(dir.file("ck"));
    pid_t dead = 4194000;
    while (dead > 300000 && ::kill(dead, 0) == 0) --dead;  // an id no process has now
    const std::string out = dir.file("out");
    const std::string aside = out + ".ckptdoc-replaced-" + std::to_string(dead);
    const auto r0 = test::run_cli({"repair", ck, "-o", aside, "--drop-optimizer", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r0, 0);
    const auto old_output = contents(aside);
    fs::last_write_time(aside, fs::file_time_type::clock::now() - std::chrono::minutes(5));
    auto r = test::run_cli({"repair", ck, "-o", out, "--refresh-fp32", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(mentions(r.err, "not empty"), r.err.c_str());
    QVERIFY(!fs::exists(aside));
    QVERIFY(contents(out) == old_output);
    fs::rename(out, aside);
    r = test::run_cli({"convert", ck, "-o", out, "--to", "universal", "-q", "--force"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(!fs::exists(aside));
    QVERIFY(fs::exists(out + "/global_step5_universal"));
  }

  // A tag folder with thousands of files DeepSpeed does not read: the plan listed each and the repair copied
  // them with an fsync each (~135 files/s). Now the plan sums them up in one line and their syncs are made
  // together.
  void manyUnrelatedFilesAreSummedUpAndCopied() {
    test::TempDir dir;
    const std::string ck = real_checkpoint(dir.file("ck"));
    for (int i = 0; i < 2000; ++i)
      test::write_text(ck + "/global_step5/junk_" + std::to_string(i) + ".txt", "x");
    const std::string out = dir.file("out");
    const auto plan =
        test::run_cli({"repair", ck, "-o", out, "--refresh-fp32", "--device", "cpu", "--dry-run"});
    CKPTDOC_EXPECT_EXIT(plan, 0);
    QVERIFY2(mentions(plan.out, "2000 other files of the tag folder"), plan.out.c_str());
    QVERIFY2(!mentions(plan.out, "junk_1999.txt"), "every file listed");
    CKPTDOC_EXPECT_EXIT(test::run_cli({"repair", ck, "-o", out, "--refresh-fp32", "--device", "cpu"}), 0);
    QCOMPARE(test::read_text(out + "/global_step5/junk_1999.txt"), std::string("x"));
  }
};

CKPTDOC_TEST_MAIN(TestOutputSafety)
#include "test_output_safety.moc"
