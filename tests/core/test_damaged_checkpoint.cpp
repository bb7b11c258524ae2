// Damaged DeepSpeed checkpoints: a rank file truncated at many points and with bytes flipped across it must
// give a clear error or a correct partial report, never a crash, a hang or a silently wrong clean result.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <filesystem>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

struct Outcome {
  int errors = 0, reported = 0, clean = 0;
  int clean_but_different =
      0;  // diagnosed clean, yet not what the undamaged file gives: a silent wrong result
  std::string first_difference;
};

// What a diagnosis says, without what varies from run to run (time, backend, paths).
QJsonObject essence(const analysis::Report& report, const deepspeed::Catalog& catalog) {
  auto j =
      QJsonDocument::fromJson(QByteArray::fromStdString(analysis::report_json(report, catalog))).object();
  for (const char* k : {"seconds", "backend", "bytes_scanned", "devices", "path"}) j.remove(k);
  return j;
}

// Opens and diagnoses (with checksums: a flipped tensor byte is otherwise invisible); a thrown Error counts
// as a clear error, a report with an error finding as reported, and a clean report must equal `healthy`.
void examine(const std::string& dir, const QJsonObject& healthy, Outcome& o, bool checksums = false) {
  try {
    const auto ckpt = deepspeed::Checkpoint::open(dir);
    analysis::DiagnoseOptions opt;
    opt.device = DeviceKind::Cpu;
    opt.threads = 1;
    opt.verify_checksums = checksums;
    const auto report = deepspeed::diagnose(*ckpt, opt);
    if (report.has_error()) {
      ++o.reported;
    } else {
      ++o.clean;
      if (!healthy.isEmpty() && essence(report, ckpt->catalog()) != healthy) {
        ++o.clean_but_different;
        if (o.first_difference.empty())
          o.first_difference = QJsonDocument(essence(report, ckpt->catalog()))
                                   .toJson(QJsonDocument::Compact)
                                   .left(600)
                                   .toStdString();
      }
    }
  } catch (const Error&) {
    ++o.errors;
  }
}

QJsonObject healthy_essence(const std::string& dir) {
  const auto ckpt = deepspeed::Checkpoint::open(dir);
  analysis::DiagnoseOptions opt;
  opt.device = DeviceKind::Cpu;
  opt.threads = 1;
  opt.verify_checksums = true;
  return essence(deepspeed::diagnose(*ckpt, opt), ckpt->catalog());
}

}  // namespace

class TestDamagedCheckpoint : public QObject {
  Q_OBJECT

 private slots:
  void truncatedRankFileIsAlwaysNoticed() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    test::copy_tree(test::deepspeed_fixture("zero1_fp16_ws2") + "/checkpoint", ckpt);
    const std::string victim = ckpt + "/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt";
    const std::string original = test::read_text(victim);
    Outcome o;
    int cuts = 0;
    for (size_t n = 0; n < original.size(); n += 1013, ++cuts) {
      test::write_text(victim, original.substr(0, n));
      examine(ckpt, {}, o);
    }
    test::write_text(victim, original);
    qInfo("truncations: %d, errors: %d, reported: %d, clean: %d", cuts, o.errors, o.reported, o.clean);
    QCOMPARE(o.clean, 0);  // a cut rank file never passes as healthy
    QVERIFY(cuts > 400);
  }

  // Every flip is an error, a reported problem, or changes nothing ckptdoc reports (a byte no reader uses,
  // such as a timestamp in a zip header); a flip inside a record's data is always reported (its CRC-32).
  void flippedBytesAreNeverSilentlyWrong() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", ckpt);
    const std::string victim = ckpt + "/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt";
    const std::string original = test::read_text(victim);
    const QJsonObject healthy = healthy_essence(ckpt);
    QVERIFY(!healthy.isEmpty());
    std::vector<std::pair<uint64_t, uint64_t>> data;  // [begin, end) of every record's bytes
    {
      ZipReader zip(MappedFile::open(victim));
      for (const auto& e : zip.entries()) data.emplace_back(e.data_offset, e.data_offset + e.compressed_size);
    }
    auto in_data = [&](uint64_t at) {
      for (const auto& [b, e] : data)
        if (at >= b && at < e) return true;
      return false;
    };
    Outcome o;
    int flips = 0, data_flips = 0, data_flips_unreported = 0;
    // Every byte of the pickle and headers (the first 4 KiB), then a stride through the tensor data.
    for (size_t i = 0; i < original.size(); i += (i < 4096 ? 1 : 997), ++flips) {
      std::string damaged = original;
      damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
      fs::remove(victim);  // a new file each time: ext4 flushes one rewritten in place on close
      test::write_text(victim, damaged);
      const int noticed_before = o.errors + o.reported;
      examine(ckpt, healthy, o, /*checksums=*/true);
      if (in_data(i)) {
        ++data_flips;
        if (o.errors + o.reported == noticed_before) ++data_flips_unreported;
      }
    }
    qInfo("byte flips: %d (%d in record data), errors: %d, reported: %d, clean: %d", flips, data_flips,
          o.errors, o.reported, o.clean);
    QVERIFY2(o.clean_but_different == 0, o.first_difference.c_str());
    QCOMPARE(data_flips_unreported, 0);
    QVERIFY(data_flips > 400);
  }

  // A finding about one file names it in the JSON report (`files`, relative to the tag folder), so tools can
  // act on the file without parsing the message.
  void aFindingNamesItsFile() {
    test::TempDir dir;
    const std::string ckpt = dir.file("ckpt");
    test::copy_tree(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", ckpt);
    const std::string rel = "zero_pp_rank_1_mp_rank_00_optim_states.pt";
    const std::string victim = ckpt + "/global_step5/" + rel;
    uint64_t at = 0;
    {
      ZipReader zip(MappedFile::open(victim));
      for (const auto& e : zip.entries())
        if (e.compressed_size > 64) at = e.data_offset + e.compressed_size / 2;  // inside a tensor's bytes
    }
    QVERIFY(at > 0);
    std::string bytes = test::read_text(victim);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x40);
    test::write_text(victim, bytes);
    const auto c = deepspeed::Checkpoint::open(ckpt);
    analysis::DiagnoseOptions opt;
    opt.device = DeviceKind::Cpu;
    opt.verify_checksums = true;
    const auto j = QJsonDocument::fromJson(QByteArray::fromStdString(analysis::report_json(
                                               deepspeed::diagnose(*c, opt), c->catalog())))
                       .object();
    bool named = false;
    for (const auto& f : j["findings"].toArray()) {
      const auto o = f.toObject();
      QVERIFY(o["files"].isArray());  // every finding has the field
      if (o["code"].toString() == "checksum-mismatch")
        named = o["files"].toArray() == QJsonArray{QString::fromStdString(rel)};
    }
    QVERIFY2(named, QJsonDocument(j["findings"].toArray()).toJson().left(3000).constData());
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestDamagedCheckpoint)
#include "test_damaged_checkpoint.moc"
