// megatron-core 0.18+'s integrity.json (#28) as megatron-core 0.18.0 writes it: realds.py entry
// v019_megatron_tp2_integrity is tests/realds/megatron_train.py's TP 2 GPTModel saved with
// dist_checkpointing.save(..., verify_integrity=True) (megatron_integrity_train.py), so its iteration folder
// holds {"algorithm": "sha256", "files": {name: sha256}} beside the DCP files. `diagnose --verify-checksums`
// hashes every listed file; without the flag the verdict says the hashes were not verified. What is right is
// judged by megatron-core's own verify_integrity_manifest (megatron_integrity_verify.py) on the same folder,
// and the hashes by Qt's SHA-256, not by ckptdoc. Damaged copies only: the cache is never written.
#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ckptdoc/session/session.h"
#include "ckptdoc/sources/registry.h"
#include "ckptdoc/task/progress.h"
#include "realds_support.h"

using namespace ckptdoc;
namespace realds = ckptdoc::test::realds;

namespace {

constexpr const char* kEntry = "v019_megatron_tp2_integrity";
constexpr const char* kMcore = "0.18.0";  // scripts/judges-extra-megatron-core.txt

std::string iteration_of(const std::string& save) {
  return save + "/iter_0000002";
}

// One byte of a copy's __1_0.distcp flipped where only a hash of the whole file sees it: inside the first run
// of torch.save's zip padding ('Z' bytes in a local header's extra field, which aligns each record to 64
// bytes and is covered by no record's CRC-32). Found by content: a fixed offset landed in a CRC-covered
// record on a save made afresh (the files' layout differs from save to save).
void flip_a_byte(const std::string& file) {
  const std::string bytes = test::read_text(file);
  const size_t run = bytes.find(std::string(8, 'Z'));
  QVERIFY2(run != std::string::npos, (file + ": no torch.save zip padding found").c_str());
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(run + 4));
  const char c = static_cast<char>(bytes[run + 4] ^ 0x01);
  f.write(&c, 1);
}

uint64_t listed_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& name : realds::parse(test::read_text(dir + "/integrity.json"))["files"].toObject().keys())
    n += std::filesystem::file_size(dir + "/" + name.toStdString());
  return n;
}

// The session's analysis of `path` with the views' "Verify checksums" set to `verify`.
std::optional<sources::SourceDiagnosis> app_diagnosis(const std::string& path, bool verify) {
  session::Session s;
  s.settings().verify_checksums = verify;
  s.open(path);
  const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < end) {
    s.poll();
    if (s.report() && !s.analysing()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!s.source_diagnosis()) return std::nullopt;
  return *s.source_diagnosis();
}

std::vector<std::string> problem_codes(const QJsonObject& report) {
  std::vector<std::string> out;
  for (const auto& p : report["problems"].toArray())
    out.push_back(p.toObject()["code"].toString().toStdString());
  return out;
}

QJsonObject problem(const QJsonObject& report, const QString& code) {
  for (const auto& p : report["problems"].toArray())
    if (p.toObject()["code"].toString() == code) return p.toObject();
  return {};
}

// megatron-core's verify_integrity_manifest on `dir`: {"ok", "error", "megatron_core"}.
QJsonObject megatron_verdict(const std::string& dir) {
  const auto r = realds::python_with_megatron_core(
      {test::source_dir() + "/tests/realds/megatron_integrity_verify.py", dir}, kMcore);
  if (r.exit_code != 0) qWarning("%s", realds::describe(r).c_str());
  return r.exit_code == 0 ? realds::parse(r.out) : QJsonObject{};
}

QString sha256_of(const std::string& path) {
  QFile f(QString::fromStdString(path));
  if (!f.open(QIODevice::ReadOnly)) return {};
  QCryptographicHash h(QCryptographicHash::Sha256);
  h.addData(&f);
  return QString::fromLatin1(h.result().toHex());
}

QString verdict_text(const QJsonObject& report) {
  return report["verdict"].toObject()["text"].toString();
}

}  // namespace

class TestRealdsMegatronIntegrity : public QObject {
  Q_OBJECT

 private slots:
  // What 0.18.0 wrote: integrity.json lists the five files it saved, and megatron-core verifies them.
  void realSaveHasAnIntegrityList() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const auto dir = iteration_of(e.save_dir);
    const auto manifest = realds::parse(test::read_text(dir + "/integrity.json"));
    QCOMPARE(manifest["algorithm"].toString(), QString("sha256"));
    QCOMPARE(manifest["files"].toObject().keys(),
             (QStringList{".metadata", "__0_0.distcp", "__1_0.distcp", "common.pt", "metadata.json"}));
    const auto truth = megatron_verdict(dir);
    QCOMPARE(truth["megatron_core"].toString(), QString(kMcore));
    QVERIFY2(truth["ok"].toBool(), qPrintable(truth["error"].toString()));
  }

  // --verify-checksums on the clean save: every listed file hashed, the count said.
  void cleanSaveIsVerifiedWithTheCount() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    for (const auto& path : {e.save_dir, iteration_of(e.save_dir)}) {
      const auto d = test::run_cli({"diagnose", path, "--verify-checksums", "--json"});
      CKPTDOC_EXPECT_EXIT(d, 0);
      const auto report = realds::parse(d.out);
      QVERIFY2(problem_codes(report).empty(), d.out.c_str());
      const auto integrity = report["megatron"].toObject()["integrity"].toObject();
      QVERIFY(integrity["verified"].toBool());
      QCOMPARE(integrity["listed"].toInt(), 5);
      QCOMPARE(integrity["matched"].toInt(), 5);
      QVERIFY2(verdict_text(report).contains("integrity.json: 5 of 5 listed files verified, sha256 equal."),
               qPrintable(verdict_text(report)));
      // the DCP reading's "no checksum of whole files" is no longer true
      for (const auto& n : report["verdict"].toObject()["not_checked"].toArray())
        QVERIFY2(!n.toString().contains("integrity.json") &&
                     !n.toString().startsWith("no checksum of whole files"),
                 qPrintable(n.toString()));
    }
    const auto text = test::run_cli({"diagnose", e.save_dir, "--verify-checksums"});
    CKPTDOC_EXPECT_EXIT(text, 0);
    QVERIFY2(text.out.find("integrity.json: 5 of 5 listed files verified") != std::string::npos,
             text.out.c_str());
  }

  // Without the flag nothing is hashed, and the verdict and its not-checked list say so.
  void withoutTheFlagTheHashesAreSaidNotVerified() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const auto d = test::run_cli({"diagnose", e.save_dir, "--json"});
    CKPTDOC_EXPECT_EXIT(d, 0);
    const auto report = realds::parse(d.out);
    QVERIFY2(verdict_text(report).contains(
                 "integrity.json present (5 files listed), their sha256 NOT verified (diagnose "
                 "--verify-checksums does)."),
             qPrintable(verdict_text(report)));
    QVERIFY(!report["megatron"].toObject()["integrity"].toObject()["verified"].toBool());
    QStringList not_checked;
    for (const auto& n : report["verdict"].toObject()["not_checked"].toArray()) not_checked << n.toString();
    QVERIFY2(
        not_checked.contains("integrity.json's sha256 of 5 files not verified (diagnose --verify-checksums)"),
        qPrintable(not_checked.join(" | ")));
  }

  // One byte flipped in __1_0.distcp where no record's CRC-32 looks (flip_a_byte), so only the hash shows
  // it; the file is named with the listed and the actual sha256, as megatron-core's load refuses it.
  void tamperedFileIsNamedExactly() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir, "tampered");
    const auto file = iteration_of(in) + "/__1_0.distcp";
    const auto listed = realds::parse(test::read_text(iteration_of(in) + "/integrity.json"))["files"]
                            .toObject()["__1_0.distcp"]
                            .toString();
    flip_a_byte(file);
    const QString actual = sha256_of(file);
    QVERIFY(actual != listed && actual.size() == 64);
    const auto truth = megatron_verdict(iteration_of(in));
    QVERIFY(!truth["ok"].toBool());
    QVERIFY2(truth["error"].toString().contains("__1_0.distcp: hash mismatch"),
             qPrintable(truth["error"].toString()));

    const auto d = test::run_cli({"diagnose", in, "--verify-checksums", "--json"});
    CKPTDOC_EXPECT_EXIT(d, 1);
    const auto report = realds::parse(d.out);
    QCOMPARE(problem_codes(report), std::vector<std::string>{"megatron-integrity-mismatch"});
    const auto p = problem(report, "megatron-integrity-mismatch");
    QCOMPARE(p["file"].toString(), QString("__1_0.distcp"));
    QCOMPARE(p["severity"].toString(), QString("error"));
    const auto message = p["message"].toString();
    QVERIFY2(message.contains("'__1_0.distcp': sha256 " + actual + ", integrity.json says " + listed),
             qPrintable(message));
    QVERIFY2(verdict_text(report).contains("integrity.json: 4 of 5 listed files verified"),
             qPrintable(verdict_text(report)));

    // Without the flag the flipped byte is not seen, and the verdict does not claim it was looked for.
    const auto plain = test::run_cli({"diagnose", in, "--json"});
    const auto plain_report = realds::parse(plain.out);
    QVERIFY2(verdict_text(plain_report).contains("their sha256 NOT verified"),
             qPrintable(verdict_text(plain_report)));
  }

  // A listed file removed: named as listed and missing (the DCP reading names it too), as megatron-core does.
  void missingListedFileIsNamed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir, "missing");
    std::filesystem::remove(iteration_of(in) + "/__1_0.distcp");
    const auto truth = megatron_verdict(iteration_of(in));
    QVERIFY(!truth["ok"].toBool());
    QVERIFY2(truth["error"].toString().contains("__1_0.distcp: file missing or unreadable"),
             qPrintable(truth["error"].toString()));
    const auto d = test::run_cli({"diagnose", in, "--verify-checksums", "--json"});
    CKPTDOC_EXPECT_EXIT(d, 1);
    const auto report = realds::parse(d.out);
    const auto p = problem(report, "megatron-integrity-missing");
    QCOMPARE(p["file"].toString(), QString("__1_0.distcp"));
    QCOMPARE(p["severity"].toString(), QString("error"));
    QCOMPARE(problem(report, "dcp-file-missing")["file"].toString(), QString("__1_0.distcp"));
    QVERIFY2(verdict_text(report).contains("integrity.json: 4 of 5 listed files verified"),
             qPrintable(verdict_text(report)));
  }

  // A file added after the save: megatron-core lists every file it saved, so one it lacks is named (a
  // warning: megatron-core's verify does not look for it and loads the checkpoint).
  void unlistedFileIsNamed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir, "unlisted");
    test::write_text(iteration_of(in) + "/notes.txt", "added later\n");
    QVERIFY(megatron_verdict(iteration_of(in))["ok"].toBool());
    const auto d = test::run_cli({"diagnose", in, "--verify-checksums", "--json"});
    CKPTDOC_EXPECT_EXIT(d, 0);
    const auto report = realds::parse(d.out);
    QCOMPARE(problem_codes(report), std::vector<std::string>{"megatron-integrity-unlisted"});
    const auto p = problem(report, "megatron-integrity-unlisted");
    QCOMPARE(p["file"].toString(), QString("notes.txt"));
    QCOMPARE(p["severity"].toString(), QString("warning"));
    QVERIFY2(verdict_text(report).contains("integrity.json: 5 of 5 listed files verified"),
             qPrintable(verdict_text(report)));
  }

  // integrity.json cut short: megatron-core's load with verify_integrity fails on it; ckptdoc names it.
  void malformedListIsNamed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir, "malformed");
    const auto path = iteration_of(in) + "/integrity.json";
    const auto text = test::read_text(path);
    test::write_text(path, text.substr(0, text.size() / 2));
    QVERIFY(!megatron_verdict(iteration_of(in))["ok"].toBool());
    for (const bool verify : {false, true}) {
      std::vector<std::string> args{"diagnose", in, "--json"};
      if (verify) args.push_back("--verify-checksums");
      const auto d = test::run_cli(args);
      CKPTDOC_EXPECT_EXIT(d, 1);
      const auto report = realds::parse(d.out);
      QCOMPARE(problem_codes(report), std::vector<std::string>{"megatron-integrity-unreadable"});
      const auto p = problem(report, "megatron-integrity-unreadable");
      QCOMPARE(p["file"].toString(), QString("integrity.json"));
      QVERIFY2(p["message"].toString().startsWith("integrity.json: not a JSON object"),
               qPrintable(p["message"].toString()));
      QVERIFY2(verdict_text(report).contains("integrity.json could not be read as a sha256 list"),
               qPrintable(verdict_text(report)));
    }
  }

  // A list edited to name a path outside the folder, or another algorithm: named, never read; megatron-core
  // refuses the algorithm too.
  void editedListIsNamedNotFollowed() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    test::TempDir dir;
    {
      const auto in = realds::copy_of(e, dir, "escape");
      const auto path = iteration_of(in) + "/integrity.json";
      auto manifest = realds::parse(test::read_text(path));
      auto files = manifest["files"].toObject();
      files["../latest_checkpointed_iteration.txt"] = QString(64, '0');
      manifest["files"] = files;
      test::write_text(path, QJsonDocument(manifest).toJson().toStdString());
      const auto d = test::run_cli({"diagnose", in, "--verify-checksums", "--json"});
      CKPTDOC_EXPECT_EXIT(d, 1);
      const auto report = realds::parse(d.out);
      QCOMPARE(problem_codes(report), std::vector<std::string>{"megatron-integrity-unreadable"});
      const auto message = problem(report, "megatron-integrity-unreadable")["message"].toString();
      QVERIFY2(message.contains(
                   "lists '../latest_checkpointed_iteration.txt', not a file name in the folder: not read"),
               qPrintable(message));
      QVERIFY2(verdict_text(report).contains("integrity.json: 5 of 6 listed files verified"),
               qPrintable(verdict_text(report)));
    }
    {
      const auto in = realds::copy_of(e, dir, "md5");
      const auto path = iteration_of(in) + "/integrity.json";
      auto manifest = realds::parse(test::read_text(path));
      manifest["algorithm"] = "md5";
      test::write_text(path, QJsonDocument(manifest).toJson().toStdString());
      const auto truth = megatron_verdict(iteration_of(in));
      QVERIFY2(!truth["ok"].toBool() && truth["error"].toString().contains("Unsupported hash algorithm"),
               qPrintable(truth["error"].toString()));
      const auto d = test::run_cli({"diagnose", in, "--verify-checksums", "--json"});
      CKPTDOC_EXPECT_EXIT(d, 1);
      const auto report = realds::parse(d.out);
      QCOMPARE(problem_codes(report), std::vector<std::string>{"megatron-integrity-unreadable"});
      QVERIFY2(problem(report, "megatron-integrity-unreadable")["message"].toString().contains(
                   "algorithm \"md5\", not \"sha256\""),
               d.out.c_str());
    }
  }

  // The views' "Verify checksums" (the session's setting) hashes as the CLI flag does; off, the verdict says
  // the hashes were not verified.
  void appSettingVerifiesTheHashes() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    test::TempDir dir;
    const auto in = realds::copy_of(e, dir, "tampered");
    flip_a_byte(iteration_of(in) + "/__1_0.distcp");
    const auto on = app_diagnosis(in, true);
    QVERIFY(on);
    QCOMPARE(on->findings.size(), size_t{1});
    QCOMPARE(on->findings[0].code, std::string("megatron-integrity-mismatch"));
    QCOMPARE(on->findings[0].files, std::vector<std::string>{"__1_0.distcp"});
    QVERIFY(!on->clean);
    const auto off = app_diagnosis(in, false);
    QVERIFY(off);
    QVERIFY2(off->findings.empty(), off->verdict.c_str());
    QVERIFY2(off->verdict.find("their sha256 NOT verified") != std::string::npos, off->verdict.c_str());
  }

  // The hashing counts every listed byte on the front end's progress, and a cancel as it starts stops it
  // (Cancelled, nothing reported).
  void hashingReportsProgressAndCancels() {
    REALDS_REQUIRE_DS("0.19");
    const auto e = realds::checkpoint(kEntry);
    const auto source = sources::find_source(e.save_dir);
    Progress progress;
    const auto d =
        source->diagnosis_for({.path = e.save_dir, .verify_checksums = true, .progress = &progress});
    QVERIFY(d && d->clean);
    QCOMPARE(progress.stage(), std::string("verifying integrity.json sha256"));
    QCOMPARE(progress.total(), listed_bytes(iteration_of(e.save_dir)));
    QCOMPARE(progress.done(), progress.total());

    Progress cancelled;
    cancelled.on_stage([&](const std::string& stage) {
      if (stage == "verifying integrity.json sha256") cancelled.cancel();
    });
    bool threw = false;
    try {
      source->diagnosis_for({.path = e.save_dir, .verify_checksums = true, .progress = &cancelled});
    } catch (const Cancelled&) {
      threw = true;
    }
    QVERIFY(threw);
    QCOMPARE(cancelled.done(), uint64_t{0});  // no file was read
  }
};

QTEST_GUILESS_MAIN(TestRealdsMegatronIntegrity)
#include "test_realds_megatron_integrity.moc"
