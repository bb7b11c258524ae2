#pragma once
// Real DeepSpeed in the tests: checkpoints of tests/realds/realds.py's matrix, written by unmodified
// DeepSpeed
// (../shared/deepspeed) once per build and reused, reference values dumped by DeepSpeed itself, and the real
// engine.load_checkpoint + one training step (ds_load_check.py) as the acceptance oracle of every repair.
#include <QJsonArray>
#include <QJsonObject>
#include <QtTest>
#include <string>
#include <vector>

#include "test_support.h"

namespace ckptdoc::test::realds {

// Why real DeepSpeed cannot run here (no ../shared/deepspeed, missing python modules); empty when it can.
std::string unavailable_reason();
// The same for one DeepSpeed version: "0.19" also needs the judge venv (scripts/setup-judges.sh).
std::string unavailable_reason(const std::string& ds);
// CKPTDOC_REQUIRE_DEEPSPEED=1 (CI): a missing DeepSpeed fails the test instead of skipping it.
bool required();

// A checkpoint of the matrix (see `realds.py list`).
struct Entry {
  std::string name, kind, save_dir, tag, dtype, model, ds;
  int stage = 0, dp = 0, steps = 0;
  bool bf16opt = false;
  int pp = 1, tp = 1, ep = 1,
      world = 0;  // tensor/pipeline/expert-parallel entries ("par"): world = pp * tp * dp
  QJsonObject
      spec;  // the whole recipe (`realds.py path`), for fields only some kinds have (hftrainer: gather, tied)
  std::string tag_dir() const { return save_dir + "/" + tag; }
};
// Writes the entry with real DeepSpeed unless the build's cache holds it; throws std::runtime_error saying
// why not.
Entry checkpoint(const std::string& name);
// A Megatron save's iteration folder: save_dir/iter_<tag as 7 digits>, as Megatron-LM names it.
std::string megatron_iteration_dir(const Entry& e);
// The DeepSpeed that writes a matrix entry, from its name (v019_*: today's, in the judges' venv; v145_* or
// *_v145: 0.14.5), for REALDS_REQUIRE_DS before the entry is written.
std::string version_of(const std::string& name);
// A copy of an entry's save folder under `dir` (tests that damage or repair must not touch the cache).
std::string copy_of(const Entry& e, const TempDir& dir, const std::string& as = "in");
// Reference files made by real DeepSpeed or torch: "fp32" / "moments" (what engine.load_checkpoint
// consolidates from the entry, ds_load_check --dump-*), "lp" (the module's weights as float32),
// "zero_to_fp32" (DeepSpeed's own script's output).
std::string reference(const std::string& name, const std::string& kind);

// engine.load_checkpoint(ckpt) in real DeepSpeed, configured like matrix entry `like` (stage, dtype,
// optimizer, model, version), then one training step. `args` go to ds_load_check.py (--strict, --expect-fp32
// F, ...).
struct LoadCheck {
  int exit_code = -1;
  QJsonObject report;  // ds_load_check's JSON report
  std::string log;     // its stdout/stderr
  bool strict_ok() const { return report["verdict"].toObject()["strict_ok"].toBool(); }
  QJsonObject verdict() const { return report["verdict"].toObject(); }
  std::string describe() const;  // verdict, first exception, comparisons: for failure messages
};
// world 0: the entry's dp; ds "": the entry's DeepSpeed version.
LoadCheck load(const std::string& ckpt, const std::string& like, const std::vector<std::string>& args = {},
               int world = 0, const std::string& ds = "");

// `ckptdoc repair IN -o OUT --device cpu ACTION...`, as a user runs it.
RunResult repair(const std::string& in, const std::string& out, const std::vector<std::string>& action);

// DeepSpeed's zero_to_fp32.py of a version on a save folder.
RunResult zero_to_fp32(const std::string& ckpt, const std::string& out, const std::string& ds = "0.12.6");

// Runs a training script of ours on `world` local ranks through the harness's launch.py (ds_common
// importable), with DeepSpeed `ds`; per-rank logs go to `logdir` (launch.py prints them on failure).
RunResult launch(const std::vector<std::string>& script_and_args, int world = 2,
                 const std::string& ds = "0.12.6", const std::string& logdir = {});

// The same with the judges' DeepSpeed 0.19 and a megatron-core of scripts/judges-extra-megatron-core.txt
// first (with the shims an older one needs: tests/realds/megatron_015_shims.py).
RunResult launch_with_megatron_core(const std::vector<std::string>& script_and_args, int world,
                                    const std::string& mcore, const std::string& logdir = {});

// The same with the judges' venv and torchtitan (scripts/judges-extra-torchtitan.txt) first on PYTHONPATH.
RunResult launch_with_torchtitan(const std::vector<std::string>& script_and_args, int world,
                                 const std::string& logdir = {});

// Runs python with real DeepSpeed importable (torch.load/torch.save of DeepSpeed's own files).
RunResult python_with_deepspeed(const std::vector<std::string>& args, const std::string& ds = "0.12.6");
// The same with the judges' DeepSpeed and a newer megatron-core (scripts/judges-extra-megatron-core.txt)
// first.
RunResult python_with_megatron_core(const std::vector<std::string>& args, const std::string& mcore);

// Finding codes of `ckptdoc diagnose --json` output, by severity ("error", "warning", "info").
std::vector<std::string> codes(const QJsonObject& report, const std::string& severity);
bool has_code(const QJsonObject& report, const std::string& severity, const std::string& code);
// The first finding of `code` in a `diagnose --json` report; an empty object when there is none.
QJsonObject finding(const QJsonObject& report, const QString& code);

// `ckptdoc diagnose PATH --json --device cpu`: its report, or a test failure (and an empty object) when it
// exits with another code than `want_exit`.
QJsonObject diagnose_json(const std::string& path, int want_exit);

// tests/realds/compare_universal.py between DeepSpeed's universal folder (`theirs`) and ckptdoc's (`ours`):
// the same files, equal values; its JSON report (written into `dir`). Throws when the script itself fails.
QJsonObject compare_universal_folders(const std::string& theirs, const std::string& ours,
                                      const std::string& ds, const std::vector<std::string>& allowed_extra,
                                      const TempDir& dir);

// The JSON object `text` holds (empty when it holds none), and a process result for failure messages.
QJsonObject parse(const std::string& text);
std::string describe(const RunResult& r);

}  // namespace ckptdoc::test::realds

// At the top of every real-DeepSpeed test: skip with one line saying what is missing, or fail when CI
// requires it.
#define REALDS_REQUIRE()                                                                                 \
  do {                                                                                                   \
    const std::string why_ = ckptdoc::test::realds::unavailable_reason();                                \
    if (!why_.empty()) {                                                                                 \
      if (ckptdoc::test::realds::required()) QFAIL(("CKPTDOC_REQUIRE_DEEPSPEED=1 but " + why_).c_str()); \
      QSKIP(why_.c_str());                                                                               \
    }                                                                                                    \
  } while (0)

// The same for tests that need one DeepSpeed version ("0.19": the judge venv).
#define REALDS_REQUIRE_DS(ds)                                                                            \
  do {                                                                                                   \
    const std::string why_ = ckptdoc::test::realds::unavailable_reason(ds);                              \
    if (!why_.empty()) {                                                                                 \
      if (ckptdoc::test::realds::required()) QFAIL(("CKPTDOC_REQUIRE_DEEPSPEED=1 but " + why_).c_str()); \
      QSKIP(why_.c_str());                                                                               \
    }                                                                                                    \
  } while (0)

// Fails with ds_load_check's verdict when the real load did not pass strictly.
#define REALDS_EXPECT_STRICT(check) \
  QVERIFY2((check).strict_ok() && (check).exit_code == 0, (check).describe().c_str())
