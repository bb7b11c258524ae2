// A universal folder holds 3-4 files per param: a large model has more than a process may keep mapped
// (vm.max_map_count, 65530 by default; past it even malloc fails). Opening and diagnosing one must not keep
// its param files mapped, only the ones whose tensors are in use; and a param file replaced after opening is
// named as changed, not read as if it were the file the catalog saw.
#include <QtTest>
#include <fstream>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "test_support.h"

using namespace ckptdoc;

namespace {

// Mappings of this process of param files, zero/<param>/<state>.pt (not zero/optimizer_state.pt, one file).
int mapped_under(const std::string& zero) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    if (const auto at = line.find(zero + "/");
        at != std::string::npos && line.find('/', at + zero.size() + 1) != std::string::npos)
      ++n;
  return n;
}

// The committed ZeRO-2 fixture converted to a universal folder under tmp; returns its zero/ folder.
std::string universal_of_fixture(const test::TempDir& tmp) {
  auto src = deepspeed::Checkpoint::open(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint");
  const auto r = universal::convert_to_universal(*src, tmp.file("u"));
  if (!r.verify_failures.empty()) throw std::runtime_error("convert failed: " + r.verify_failures.front());
  return tmp.file("u/" + r.tag + "/zero");
}

}  // namespace

class TestUniversalMappings : public QObject {
  Q_OBJECT

 private slots:
  void paramFilesAreMappedOnlyWhileRead() {
    test::TempDir tmp;
    const std::string zero = universal_of_fixture(tmp);
    auto ckpt = deepspeed::Checkpoint::open(tmp.file("u"));
    const auto& cat = ckpt->catalog();
    QVERIFY(cat.universal);
    QVERIFY(cat.universal->params.size() >= 4);
    QCOMPARE(mapped_under(zero), 0);  // catalogued: shapes and steps read, nothing kept mapped
    {
      const auto fp32 = ckpt->fp32_partition(0, 0);
      const auto m = ckpt->moment_partition(0, 0, "exp_avg");
      QVERIFY(fp32 && m);
      QCOMPARE(fp32->numel(), cat.groups[0].numel);
      QCOMPARE(mapped_under(zero), 2);  // the two files whose tensors are alive
    }
    QCOMPARE(mapped_under(zero), 0);
    const auto report = deepspeed::diagnose(*ckpt);
    QVERIFY(!report.has_error());
    QVERIFY(report.bytes_scanned >=
            static_cast<uint64_t>(cat.groups[0].numel) * 12);  // fp32 and both moments
    QCOMPARE(mapped_under(zero), 0);
  }

  void aParamFileReplacedAfterOpeningIsNamed() {
    test::TempDir tmp;
    const std::string zero = universal_of_fixture(tmp);
    auto ckpt = deepspeed::Checkpoint::open(tmp.file("u"));
    const auto& params = ckpt->catalog().universal->params;
    // Another param's fp32 file (another size) put in place of param 0's, as a second conversion might.
    const std::string victim = zero + "/" + params[0].name + "/fp32.pt";
    std::filesystem::copy_file(zero + "/" + params[1].name + "/fp32.pt", victim + ".new");
    std::filesystem::rename(victim + ".new", victim);
    try {
      ckpt->fp32_partition(0, 0);
      QFAIL("read a replaced file as the catalogued one");
    } catch (const Error& e) {
      const std::string what = e.what();
      QVERIFY2(what.find(victim) != std::string::npos &&
                   what.find("changed while being read") != std::string::npos,
               what.c_str());
    }
    QVERIFY(ckpt->fp32_partition(1, 0));  // the others still read
  }

  // Cut in place (same inode) after opening, as an interrupted copy over it would: diagnose names the file.
  void aParamFileCutAfterOpeningIsNamedByDiagnose() {
    test::TempDir tmp;
    const std::string zero = universal_of_fixture(tmp);
    auto ckpt = deepspeed::Checkpoint::open(tmp.file("u"));
    const std::string victim = zero + "/" + ckpt->catalog().universal->params[0].name + "/exp_avg.pt";
    std::filesystem::resize_file(victim, std::filesystem::file_size(victim) / 2);
    const auto report = deepspeed::diagnose(*ckpt);
    QVERIFY(report.has_error());
    bool named = false;
    for (const auto& f : report.findings)
      named = named || (f.message.find(victim) != std::string::npos &&
                        f.message.find("changed while being read") != std::string::npos);
    QVERIFY2(named, report.findings.front().message.c_str());
  }
};

CKPTDOC_TEST_MAIN(TestUniversalMappings)
#include "test_universal_mappings.moc"
