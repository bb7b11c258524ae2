// Error kinds (error.h): each kind is what a real bad input gets from the core, so callers can branch on it
// instead of on message text. Every case drives a real file (a copy of a committed DeepSpeed fixture, damaged
// the way it happens in practice) or a real request, checks the kind, and that the message still names the
// file.
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/format/zip_writer.h"
#include "ckptdoc/io/fault_injection.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/export.h"
#include "ckptdoc/sources/deepspeed/param_density.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

// The fixture's save folder copied to `dir/name` (fixtures are read-only).
std::string copy_of(const test::TempDir& dir, const std::string& fixture, const std::string& name = "ck") {
  const std::string ck = dir.file(name);
  test::copy_tree(test::deepspeed_fixture(fixture) + "/checkpoint", ck);
  return ck;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Runs `f` and returns the Error it throws (nullopt when it throws none).
template <class F>
std::optional<Error> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// QCOMPARE on the kinds' names, so a failure prints "corrupt" vs "truncated" rather than two numbers.
#define EXPECT_KIND(err, k)                                                                         \
  do {                                                                                              \
    QVERIFY2((err).has_value(), "no ckptdoc::Error was thrown");                                    \
    QVERIFY2((err)->kind() == (k), qPrintable(QString("kind %1 (wanted %2): %3")                    \
                                                  .arg(QString::fromUtf8(kind_name((err)->kind()))) \
                                                  .arg(QString::fromUtf8(kind_name(k)))             \
                                                  .arg(QString::fromUtf8((err)->what()))));         \
  } while (0)

bool names(const std::optional<Error>& e, const std::string& part) {
  return e && std::string(e->what()).find(part) != std::string::npos;
}

// Pickle opcodes for the hostile payload.
std::string binunicode(const std::string& s) {
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((s.size() >> (8 * i)) & 0xff);
  return out + s;
}

// The fixture's model file with `os.system('true')` called while its pickle loads (stored under a key of the
// state dict, as a hostile checkpoint carries it).
void plant_os_system(const std::string& model_file) {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> records;
  {
    ZipReader zip(MappedFile::open(model_file));
    for (const auto& e : zip.entries()) {
      const auto d = zip.data(e);
      records.push_back({e.name, {d.begin(), d.end()}});
    }
  }
  VectorSink sink;
  ZipWriter zip(sink);
  bool planted = false;
  for (auto& [name, data] : records) {
    if (name.size() > 9 && name.compare(name.size() - 9, 9, "/data.pkl") == 0) {
      const std::string head("\x80\x02}q\x00", 5);  // PROTO 2, EMPTY_DICT, BINPUT 0
      QVERIFY(std::string(data.begin(), data.begin() + 5) == head);
      const std::string call = "cos\nsystem\n(" + binunicode("true") + "tR";
      const std::string add = std::string("\x80\x04}q\x00", 5) + binunicode("evil") + call + "s\x80\x02";
      data.erase(data.begin(), data.begin() + 5);
      data.insert(data.begin(), add.begin(), add.end());
      planted = true;
    }
    zip.add(name, data);
  }
  zip.finish();
  QVERIFY(planted);
  write_file(model_file, sink.data);
}

}  // namespace

class TestErrorKinds : public QObject {
  Q_OBJECT

 private slots:
  void namesAreStableAndDistinct() {
    QCOMPARE(std::string(kind_name(ErrorKind::Io)), std::string("io"));
    QCOMPARE(std::string(kind_name(ErrorKind::UnsafePickle)), std::string("unsafe-pickle"));
    QCOMPARE(std::string(kind_name(ErrorKind::OutputExists)), std::string("output-exists"));
    std::set<std::string> seen;
    for (int k = 0; k <= static_cast<int>(ErrorKind::Device); ++k) {
      const std::string n(kind_name(static_cast<ErrorKind>(k)));
      QVERIFY2(seen.insert(n).second, n.c_str());
    }
    // The three-argument constructor stays (unclassified); with_file keeps the kind.
    QCOMPARE(Error("f", "w", "d").kind(), ErrorKind::Other);
    const Error e(ErrorKind::Truncated, "", "offset 3", "short");
    QCOMPARE(e.with_file("x.pt").kind(), ErrorKind::Truncated);
    QCOMPARE(e.with_file("x.pt").file(), std::string("x.pt"));
  }

  // A rank file cut short (a save killed half-way, a copy that ran out of disk): truncated, naming the file.
  void truncatedTorchFile() {
    test::TempDir dir;
    const std::string ck = copy_of(dir, "zero2_fp16_ws2");
    const std::string model = ck + "/global_step5/mp_rank_00_model_states.pt";
    auto bytes = read_file(model);
    bytes.resize(bytes.size() / 2);
    write_file(model, bytes);
    const auto e = error_of([&] { TorchFile::open(model); });
    EXPECT_KIND(e, ErrorKind::Truncated);
    QVERIFY2(names(e, model), e->what());
  }

  // A safetensors file whose header promises more data than the file holds.
  void truncatedSafetensors() {
    test::TempDir dir;
    const std::string path = dir.file("w.safetensors");
    write_safetensors_file(path, {{"w", Tensor::from_bytes(DType::F32, {64}, std::vector<uint8_t>(256, 0))}});
    auto bytes = read_file(path);
    bytes.resize(bytes.size() - 16);
    write_file(path, bytes);
    const auto e = error_of([&] { SafetensorsFile::open(path); });
    EXPECT_KIND(e, ErrorKind::Truncated);
    QVERIFY2(names(e, path), e->what());
  }

  // A central directory record whose signature is overwritten: bytes that contradict the format.
  void corruptZipDirectory() {
    test::TempDir dir;
    const std::string ck = copy_of(dir, "zero2_fp16_ws2");
    const std::string optim = ck + "/global_step5/zero_pp_rank_0_mp_rank_00_optim_states.pt";
    auto bytes = read_file(optim);
    const std::string sig("PK\x01\x02", 4);
    const auto at = std::search(bytes.begin(), bytes.end(), sig.begin(), sig.end());
    QVERIFY(at != bytes.end());
    at[2] = 0x07;
    write_file(optim, bytes);
    const auto e = error_of([&] { TorchFile::open(optim); });
    EXPECT_KIND(e, ErrorKind::Corrupt);
    QVERIFY2(names(e, optim), e->what());
  }

  // A dtype the reader does not know, in an otherwise valid safetensors file.
  void unsupportedDtype() {
    test::TempDir dir;
    const std::string path = dir.file("f8.safetensors");
    const std::string header = R"({"w":{"dtype":"F8_E5M2","shape":[2],"data_offsets":[0,2]}})";
    std::vector<uint8_t> bytes(8);
    for (int i = 0; i < 8; ++i)
      bytes[static_cast<size_t>(i)] = static_cast<uint8_t>((header.size() >> (8 * i)) & 0xff);
    bytes.insert(bytes.end(), header.begin(), header.end());
    bytes.insert(bytes.end(), {0, 0});
    write_file(path, bytes);
    const auto e = error_of([&] { SafetensorsFile::open(path); });
    EXPECT_KIND(e, ErrorKind::Unsupported);
    QVERIFY2(names(e, path) && names(e, "F8_E5M2"), e->what());
  }

  // A model file whose pickle calls os.system: the repair refuses to carry it into its output.
  void unsafePickleRefusedByRepair() {
    test::TempDir dir;
    const std::string ck = copy_of(dir, "zero2_fp16_ws2");
    plant_os_system(ck + "/global_step5/mp_rank_00_model_states.pt");
    const auto ckpt = deepspeed::Checkpoint::open(ck);
    repair::RepairRequest rq;
    rq.reset_optimizer = true;
    const auto e = error_of([&] { repair::make_plan(*ckpt, dir.file("out"), rq); });
    EXPECT_KIND(e, ErrorKind::UnsafePickle);
    // The core names the request field; each front end spells it (the CLI: --allow-unsafe-pickle).
    QVERIFY2(names(e, "mp_rank_00_model_states.pt") && names(e, "allow_unsafe_pickle") && !names(e, "--"),
             e->what());
    // Allowed, the same request plans.
    rq.allow_unsafe_pickle = true;
    repair::make_plan(*ckpt, dir.file("out"), rq);
  }

  // `latest` naming a folder outside the save folder, and --tag given as a path.
  void latestOutsideTheFolder() {
    test::TempDir dir;
    const std::string ck = copy_of(dir, "zero2_fp16_ws2");
    copy_of(dir, "zero2_fp16_ws2", "other");
    for (const std::string target : {"../other/global_step5", "/etc", ".."}) {
      test::write_text(ck + "/latest", target + "\n");
      const auto e = error_of([&] { deepspeed::Checkpoint::open(ck); });
      EXPECT_KIND(e, ErrorKind::PathEscape);
      QVERIFY2(names(e, ck + "/latest") && names(e, "'" + target + "'"), e->what());
    }
    test::write_text(ck + "/latest", "global_step5\n");
    deepspeed::OpenOptions o;
    o.tag = "../other/global_step5";
    const auto e = error_of([&] { deepspeed::Checkpoint::open(ck, o); });
    EXPECT_KIND(e, ErrorKind::PathEscape);
  }

  // Outputs that hold what ckptdoc did not write: a non-empty repair folder, an existing export file.
  void outputThatExists() {
    test::TempDir dir;
    const std::string ck = copy_of(dir, "zero2_fp16_ws2");
    const auto ckpt = deepspeed::Checkpoint::open(ck);
    fs::create_directories(dir.file("out"));
    test::write_text(dir.file("out/notes.txt"), "mine");
    repair::RepairRequest rq;
    rq.reset_optimizer = true;
    auto e = error_of([&] { repair::make_plan(*ckpt, dir.file("out"), rq); });
    EXPECT_KIND(e, ErrorKind::OutputExists);
    QVERIFY2(names(e, dir.file("out")), e->what());

    test::write_text(dir.file("w.safetensors"), "keep me");
    e = error_of([&] { deepspeed::export_weights(*ckpt, dir.file("w.safetensors"), {}); });
    EXPECT_KIND(e, ErrorKind::OutputExists);
    QVERIFY2(names(e, dir.file("w.safetensors")), e->what());
    QCOMPARE(test::read_text(dir.file("w.safetensors")), std::string("keep me"));
  }

  // Two checkpoints that disagree: a graft template whose 16-bit dtype is not the checkpoint's.
  void inconsistentTemplate() {
    test::TempDir dir;
    const std::string ck = copy_of(dir, "zero2_fp16_ws2");
    const std::string bf16 = copy_of(dir, "zero2_bf16_ws2", "bf16");
    const auto ckpt = deepspeed::Checkpoint::open(ck);
    repair::RepairRequest rq;
    rq.target = bf16;
    const auto e = error_of([&] { repair::make_plan(*ckpt, dir.file("out"), rq); });
    EXPECT_KIND(e, ErrorKind::Inconsistent);
    QVERIFY2(names(e, "target") && !names(e, "--"), e->what());
  }

  void notFound() {
    test::TempDir dir;
    const std::string ck = copy_of(dir, "zero2_fp16_ws2");
    auto e = error_of([&] { deepspeed::Checkpoint::open(dir.file("nothing-here")); });
    EXPECT_KIND(e, ErrorKind::NotFound);
    QVERIFY2(names(e, dir.file("nothing-here")), e->what());
    deepspeed::OpenOptions o;
    o.tag = "global_step99";
    e = error_of([&] { deepspeed::Checkpoint::open(ck, o); });
    EXPECT_KIND(e, ErrorKind::NotFound);
    e = error_of([&] { MappedFile::open(dir.file("absent.pt")); });
    EXPECT_KIND(e, ErrorKind::NotFound);
  }

  // Requests the core turns down, including the one that used to escape as std::invalid_argument.
  void invalidRequest() {
    const auto ckpt = deepspeed::Checkpoint::open(test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint");
    test::TempDir dir;
    auto e = error_of([&] { repair::make_plan(*ckpt, dir.file("out"), {}); });  // no repair asked for
    EXPECT_KIND(e, ErrorKind::InvalidRequest);
    e = error_of([&] { deepspeed::param_density(*ckpt, 0, 0, 0); });
    EXPECT_KIND(e, ErrorKind::InvalidRequest);
    e = error_of([&] { deepspeed::param_density(*ckpt, 0, 99999, 40); });
    EXPECT_KIND(e, ErrorKind::InvalidRequest);
  }

  // The operating system refusing a write (disk full): io, naming the file.
  void diskFull() {
    test::TempDir dir;
    const std::string path = dir.file("out.bin");
    FaultPlan plan;
    plan.calls = "write";
    plan.at_call = 1;
    FaultyIo io(posix_io(), plan);
    const auto e = error_of([&] {
      AtomicFile f(path, io);
      f.write(std::vector<uint8_t>(4 << 20, 1));
      f.commit();
    });
    EXPECT_KIND(e, ErrorKind::Io);
    QVERIFY2(names(e, path) && names(e, "No space left"), e->what());
  }

  // `watch --json` gives the kind of a snapshot it cannot read; the text line stays as it was.
  void watchJsonCarriesTheKind() {
    test::TempDir dir;
    const std::string run = dir.file("run");
    fs::create_directories(run + "/bad");  // committed (its manifest is there) but not valid JSON
    test::write_text(run + "/bad/manifest.json", R"({"format": "ckptdoc-snapshot",)");
    auto r = test::run_cli({"watch", run, "--json", "--once", "--timeout", "3", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 3);
    QJsonObject event;
    for (const auto& line : QString::fromStdString(r.out).split('\n')) {
      const QJsonObject j = QJsonDocument::fromJson(line.toUtf8()).object();
      if (j["event"].toString() == "unreadable") event = j;
    }
    QVERIFY2(!event.isEmpty(), r.out.c_str());
    QCOMPARE(event["kind"].toString(), QString("corrupt"));
    QVERIFY2(event["error"].toString().contains("manifest.json"), r.out.c_str());
    r = test::run_cli({"watch", run, "--once", "--timeout", "3", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 3);
    QVERIFY2(r.out.find("unreadable: ") != std::string::npos && r.out.find("corrupt") == std::string::npos,
             r.out.c_str());
  }
};

CKPTDOC_TEST_MAIN(TestErrorKinds)
#include "test_error_kinds.moc"
