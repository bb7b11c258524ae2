// ZipReader, ZipWriter and AtomicFile against archives made by torch 1.13 and CPython's zipfile.
#include <fcntl.h>
#include <unistd.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/format/zip_writer.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/io/mapped_file.h"
#include "generated_fixture.h"
#include "page_cache.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

std::string fixture_script() {
  return test::script("fixtures/make_zip_fixtures.py");
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  const std::string s = test::read_text(path);
  return {s.begin(), s.end()};
}

void write_bytes(const std::string& path, std::span<const uint8_t> bytes) {
  test::write_text(path, std::string(bytes.begin(), bytes.end()));
}

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<uint8_t> from_hex(const QString& hex) {
  const QByteArray raw = QByteArray::fromHex(hex.toLatin1());
  return {raw.begin(), raw.end()};
}

uint16_t get16(std::span<const uint8_t> b, uint64_t at) {
  return static_cast<uint16_t>(b[at] | b[at + 1] << 8);
}
uint32_t get32(std::span<const uint8_t> b, uint64_t at) {
  return static_cast<uint32_t>(get16(b, at)) | static_cast<uint32_t>(get16(b, at + 2)) << 16;
}
uint64_t get64(std::span<const uint8_t> b, uint64_t at) {
  return static_cast<uint64_t>(get32(b, at)) | static_cast<uint64_t>(get32(b, at + 4)) << 32;
}
void put32(std::vector<uint8_t>& b, uint64_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<uint64_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(std::vector<uint8_t>& b, uint64_t at, uint64_t v) {
  put32(b, at, static_cast<uint32_t>(v));
  put32(b, at + 4, static_cast<uint32_t>(v >> 32));
}

uint64_t find_sig(const std::vector<uint8_t>& b, const char* sig) {
  const std::string_view hay(reinterpret_cast<const char*>(b.data()), b.size());
  const auto at = hay.find(std::string_view(sig, 4));
  return at == std::string_view::npos ? UINT64_MAX : at;
}

uint32_t crc_bitwise(std::span<const uint8_t> bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

QJsonObject run_json(const std::vector<std::string>& args, bool* ok) {
  const auto r = test::run_python(fixture_script(), args);
  *ok = r.exit_code == 0;
  if (!*ok) qWarning("python failed (%d): %s %s", r.exit_code, r.out.c_str(), r.err.c_str());
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

// Opens `path` with ZipReader and returns the error text ("" when it opened).
std::string open_error(const std::string& path) {
  try {
    ZipReader reader(MappedFile::open(path));
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

// Writes to a file, but turns writes of the sink's own zero buffer into holes, so multi-GiB records of zeros
// cost neither disk nor much time.
class HoleSink : public ByteSink {
 public:
  explicit HoleSink(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)) {}
  ~HoleSink() override {
    if (fd_ >= 0) close();
  }
  void write(std::span<const uint8_t> bytes) override {
    if (!bytes.empty() && bytes.data() >= zeros.data() && bytes.data() < zeros.data() + zeros.size()) {
      if (::lseek(fd_, static_cast<off_t>(bytes.size()), SEEK_CUR) < 0) throw std::runtime_error("lseek");
    } else if (::write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
      throw std::runtime_error("write");
    }
    pos_ += bytes.size();
  }
  uint64_t position() const override { return pos_; }
  bool close() {
    const bool ok = ::ftruncate(fd_, static_cast<off_t>(pos_)) == 0 && ::close(fd_) == 0;
    fd_ = -1;
    return ok;
  }
  std::vector<uint8_t> zeros = std::vector<uint8_t>(8 << 20);

 private:
  int fd_;
  uint64_t pos_ = 0;
};

// Passes everything to the real file system except the calls a test wants to fail.
class FakeIo : public FileIo {
 public:
  int fail_write_after = -1;  // number of successful write calls before ENOSPC; -1 = never
  bool half_writes = false;   // each successful write takes only half the bytes (a short write)
  int writes = 0;
  std::vector<std::string> unlinked;

  int open_write(const std::string& path, int* fd) override { return posix_io().open_write(path, fd); }
  int write(int fd, const uint8_t* data, size_t size, size_t* written) override {
    if (fail_write_after >= 0 && writes >= fail_write_after) {
      *written = 0;
      return ENOSPC;
    }
    ++writes;
    return posix_io().write(fd, data, half_writes && size > 1 ? size / 2 : size, written);
  }
  int fsync(int fd) override { return posix_io().fsync(fd); }
  int close(int fd) override { return posix_io().close(fd); }
  int rename(const std::string& from, const std::string& to) override { return posix_io().rename(from, to); }
  int unlink(const std::string& path) override {
    unlinked.push_back(path);
    return posix_io().unlink(path);
  }
  int mkdir(const std::string& path) override { return posix_io().mkdir(path); }
  int fsync_dir(const std::string& path) override { return posix_io().fsync_dir(path); }
};

std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

class TestZip : public QObject {
  Q_OBJECT

 private:
  std::string torch_dir_;  // make_zip_fixtures.py torch's files, made once per build tree (read-only)
  std::unique_ptr<test::TempDir> out_;  // what this process writes next to them
  QJsonObject manifest_;
  // torch.save fixtures, made once per process (each test function runs in its own process under ctest).
  bool ensure_torch_fixtures();
  std::string torch_file(const std::string& name) const { return torch_dir_ + "/" + name; }
  void compare_with_python(const std::string& path, const QJsonObject& dump, bool check_content);

 private slots:
  void crc32_matches_reference();
  void reads_torch_files();
  void rewrites_torch_files_byte_for_byte();
  void rewritten_torch_file_loads_in_torch();
  void unpadded_records_read_aligned();
  void reads_more_than_65535_entries();
  void reads_forced_zip64_entries();
  void refuses_compressed_records();
  void refuses_duplicate_names_and_shared_headers();
  void reads_sparse_archive_beyond_4gib();
  void tolerates_trailing_bytes();
  void every_truncation_throws();
  void out_of_range_offsets_are_clear_errors();
  void rejects_non_zip_input();
  void cold_open_reads_no_read_ahead_window();
  void writer_output_passes_python_zipfile();
  void writer_aligns_data_for_any_alignment();
  void writer_streamed_size_mismatch_throws();
  void writer_refuses_misuse();
  void writer_zip64_layout_beyond_4gib();
  void atomic_commit_renames();
  void atomic_destructor_removes_temp();
  void atomic_enospc_names_path_and_leaves_no_temp();
  void atomic_short_write_then_failure_blocks_commit();
};

bool TestZip::ensure_torch_fixtures() {
  if (!torch_dir_.empty()) return true;
  const auto f =
      test::generated_fixture("zip_torch", {"fixtures/make_zip_fixtures.py"}, [](const std::string& dir) {
        return test::run_python(fixture_script(), {"torch", dir});
      });
  if (!f.error.empty()) {
    qWarning("fixture script failed: %s", f.error.c_str());
    return false;
  }
  torch_dir_ = f.dir;
  out_ = std::make_unique<test::TempDir>();
  manifest_ = QJsonDocument::fromJson(QByteArray::fromStdString(test::read_text(torch_file("manifest.json"))))
                  .object();
  return !manifest_.isEmpty();
}

// Checks that ZipReader sees exactly what Python's zipfile sees in `path`.
void TestZip::compare_with_python(const std::string& path, const QJsonObject& dump, bool check_content) {
  ZipReader reader(MappedFile::open(path));
  const QJsonArray entries = dump["entries"].toArray();
  QCOMPARE(reader.entries().size(), static_cast<size_t>(entries.size()));
  for (qsizetype i = 0; i < entries.size(); ++i) {
    const QJsonObject want = entries[i].toObject();
    const ZipEntry& got = reader.entries()[static_cast<size_t>(i)];
    QCOMPARE(QString::fromStdString(got.name), want["name"].toString());
    QCOMPARE(got.size, static_cast<uint64_t>(want["size"].toDouble()));
    QCOMPARE(got.crc32, static_cast<uint32_t>(want["crc"].toDouble()));
    QCOMPARE(got.header_offset, static_cast<uint64_t>(want["header_offset"].toDouble()));
    QCOMPARE(got.data_offset, static_cast<uint64_t>(want["data_offset"].toDouble()));
    QCOMPARE(got.method, static_cast<uint16_t>(want["method"].toInt()));
    if (check_content && got.method == 0 && want.contains("hex")) {
      const auto data = reader.data(got);
      const auto expected = from_hex(want["hex"].toString());
      QVERIFY2(std::equal(data.begin(), data.end(), expected.begin(), expected.end()), got.name.c_str());
      QVERIFY(reader.verify_crc(got));
    }
  }
}

void TestZip::crc32_matches_reference() {
  QCOMPARE(crc32({}), 0u);
  QCOMPARE(crc32(as_bytes("123456789")), 0xCBF43926u);
  QCOMPARE(crc32(as_bytes("The quick brown fox jumps over the lazy dog")), 0x414FA339u);
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(5000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  // Every length and misalignment the slicing loop and its tail can meet.
  for (size_t start = 0; start < 9; ++start) {
    for (size_t len : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4991}) {
      const std::span<const uint8_t> s(buf.data() + start, len);
      QCOMPARE(crc32(s), crc_bitwise(s));
    }
  }
  // Chained updates equal one pass.
  uint32_t c = 0;
  for (size_t at = 0; at < buf.size(); at += 333)
    c = crc32_update(c, std::span(buf).subspan(at, std::min<size_t>(333, buf.size() - at)));
  QCOMPARE(c, crc32(buf));
}

// Opening a torch zip cold reads its head, pickle and directory, not the device's read-ahead window around
// the first byte it checks (8 MB on the benchmark VM: 0.5 GB for the 64 optimizer files of issue #29's
// checkpoint). A 24 MB record follows the pickle; a plain first touch of the evicted file is the control.
void TestZip::cold_open_reads_no_read_ahead_window() {
  test::TempDir dir;
  const std::string path = dir.file("big.pt");
  test::write_torch_zip_with_big_record(path);
  size_t control = 0;
  if (const std::string why = test::why_read_ahead_unobservable(path, &control); !why.empty())
    QSKIP(why.c_str());
  const TorchFile tf = TorchFile::open(path);
  QVERIFY(tf.root.is_dict());
  const size_t read = test::resident_bytes(path);
  const std::string what = std::to_string(read) + " bytes read by the open, " + std::to_string(control) +
                           " by a plain first touch";
  QVERIFY2(read < (128u << 10), what.c_str());  // a page or a folio at each end
}

void TestZip::reads_torch_files() {
  QVERIFY(ensure_torch_fixtures());
  QCOMPARE(manifest_.size(), 4);
  for (const QString& name : manifest_.keys()) {
    const QJsonObject dump = manifest_[name].toObject();
    QVERIFY(dump["testzip"].isNull());
    compare_with_python(torch_file(name.toStdString()), dump, true);
    if (QTest::currentTestFailed()) return;
    ZipReader reader(MappedFile::open(torch_file(name.toStdString())));
    QVERIFY(ZipReader::looks_like_zip(reader.file()->bytes()));
    const std::string prefix = name.toStdString().substr(0, name.size() - 3) + "/";
    QVERIFY(reader.find(prefix + "data.pkl"));
    QVERIFY(reader.find(prefix + "version"));
    QVERIFY(!reader.find(prefix + "missing"));
    const auto version = reader.data(*reader.find(prefix + "version"));
    QCOMPARE(std::string(version.begin(), version.end()), std::string("3\n"));
    for (const ZipEntry& e : reader.entries()) QCOMPARE(e.data_offset % 64, 0u);  // torch's alignment
  }
}

// A torch file repacked by Python's zipfile (which torch.load reads) has its records wherever they fall. Its
// tensors read the same bytes as the original's, each starting on its element size, since readers see them as
// float arrays.
void TestZip::unpadded_records_read_aligned() {
  QVERIFY(ensure_torch_fixtures());
  const std::string src = torch_file("state.pt");
  const std::string dst = out_->file("repacked.pt");
  QCOMPARE(test::run_python(fixture_script(), {"repack", src, dst}).exit_code, 0);
  QCOMPARE(test::run_python(fixture_script(), {"load_equal", src, dst}).exit_code, 0);
  const TorchFile original = TorchFile::open(src);
  const TorchFile repacked = TorchFile::open(dst);
  QCOMPARE(repacked.storages.size(), original.storages.size());
  ZipReader zip(MappedFile::open(dst));
  int unaligned_records = 0;
  for (size_t i = 0; i < repacked.storages.size(); ++i) {
    const Storage& s = *repacked.storages[i];
    const ZipEntry* e = zip.find(repacked.archive_name + "/data/" + s.key);
    QVERIFY(e);
    const size_t es = element_size(s.dtype);
    if (e->data_offset % es != 0) ++unaligned_records;
    const auto got = s.bytes();
    const auto want = original.storages[i]->bytes();
    QVERIFY2(reinterpret_cast<uintptr_t>(got.data()) % es == 0, s.key.c_str());
    QVERIFY2(std::equal(got.begin(), got.end(), want.begin(), want.end()), s.key.c_str());
  }
  QVERIFY(unaligned_records > 0);  // else this test shows nothing
}

void TestZip::rewrites_torch_files_byte_for_byte() {
  QVERIFY(ensure_torch_fixtures());
  for (const QString& name : manifest_.keys()) {
    const std::string path = torch_file(name.toStdString());
    ZipReader reader(MappedFile::open(path));
    VectorSink out;
    ZipWriter writer(out);
    for (const ZipEntry& e : reader.entries()) writer.add(e.name, reader.data(e));
    writer.finish();
    const auto original = reader.file()->bytes();
    QVERIFY2(std::equal(out.data.begin(), out.data.end(), original.begin(), original.end()),
             qPrintable(name));
  }
}

void TestZip::rewritten_torch_file_loads_in_torch() {
  QVERIFY(ensure_torch_fixtures());
  const std::string src = torch_file("state.pt");
  const std::string dst = out_->file("rewritten.pt");
  ZipReader reader(MappedFile::open(src));
  {
    AtomicFile file(dst);
    ZipWriter writer(file);
    // Streamed in odd-sized pieces, with the prefix torch uses for buffers.
    for (const ZipEntry& e : reader.entries()) {
      const std::string renamed = "archive" + e.name.substr(e.name.find('/'));
      const auto data = reader.data(e);
      writer.add_streamed(renamed, data.size(), [&](ByteSink& sink) {
        for (size_t at = 0; at < data.size(); at += 37)
          sink.write(data.subspan(at, std::min<size_t>(37, data.size() - at)));
      });
    }
    writer.finish();
    file.commit();
  }
  const auto r = test::run_python(fixture_script(), {"load_equal", src, dst});
  CKPTDOC_EXPECT_EXIT(r, 0);
}

void TestZip::reads_more_than_65535_entries() {
  test::TempDir dir;
  const std::string path = dir.file("many.zip");
  const int n = 70000;
  const auto r = test::run_python(fixture_script(), {"many", path, std::to_string(n)});
  CKPTDOC_EXPECT_EXIT(r, 0);
  ZipReader reader(MappedFile::open(path));
  QCOMPARE(reader.entries().size(), static_cast<size_t>(n));
  char name[32], body[32];
  for (int i = 0; i < n; ++i) {
    std::snprintf(name, sizeof name, "e/%06d", i);
    std::snprintf(body, sizeof body, "entry %06d", i);
    const ZipEntry& e = reader.entries()[static_cast<size_t>(i)];
    if (e.name != name) QFAIL(qPrintable(QString("entry %1 is named %2").arg(i).arg(e.name.c_str())));
    const auto data = reader.data(e);
    if (std::string(data.begin(), data.end()) != body || !reader.verify_crc(e))
      QFAIL(qPrintable(QString("entry %1 has wrong data").arg(i)));
  }
  QCOMPARE(reader.find("e/069999"), &reader.entries().back());
  QCOMPARE(reader.find("e/065536")->header_offset, reader.entries()[65536].header_offset);
}

void TestZip::reads_forced_zip64_entries() {
  test::TempDir dir;
  const std::string path = dir.file("zip64.zip");
  CKPTDOC_EXPECT_EXIT(test::run_python(fixture_script(), {"zip64", path}), 0);
  bool ok = false;
  const QJsonObject dump = run_json({"dump", path}, &ok);
  QVERIFY(ok);
  compare_with_python(path, dump, true);
  ZipReader reader(MappedFile::open(path));
  // The forced local headers carry a ZIP64 extra field, so the data starts 20 bytes later than usual.
  const ZipEntry* e = reader.find("z64/1");
  QVERIFY(e);
  QCOMPARE(e->data_offset, e->header_offset + 30 + 5 + 20);
}

void TestZip::refuses_compressed_records() {
  test::TempDir dir;
  const std::string path = dir.file("zip64.zip");
  CKPTDOC_EXPECT_EXIT(test::run_python(fixture_script(), {"zip64", path}), 0);
  ZipReader reader(MappedFile::open(path));
  const ZipEntry* e = reader.find("deflated");
  QVERIFY(e);
  QCOMPARE(e->method, uint16_t{8});
  QCOMPARE(e->size, uint64_t{1100});
  QVERIFY(e->compressed_size < e->size);
  try {
    (void)reader.data(*e);
    QFAIL("data() returned a compressed record");
  } catch (const Error& err) {
    QCOMPARE(err.kind(), ErrorKind::Unsupported);
    const std::string msg = err.what();
    QVERIFY2(msg.find("method 8") != std::string::npos && msg.find("deflate") != std::string::npos,
             msg.c_str());
    QVERIFY2(msg.find(path) != std::string::npos && msg.find("'deflated'") != std::string::npos, msg.c_str());
  }
  QVERIFY_THROWS_EXCEPTION(Error, reader.verify_crc(*e));
}

// Two records of one name, or two names for one local header, read differently in different readers (torch
// takes one of them): refused, naming the record (the first of two names used to be taken silently).
void TestZip::refuses_duplicate_names_and_shared_headers() {
  test::TempDir dir;
  for (const std::string kind : {"duplicates", "shared_header"}) {
    const std::string path = dir.file(kind + ".zip");
    CKPTDOC_EXPECT_EXIT(test::run_python(fixture_script(), {kind, path}), 0);
    try {
      ZipReader reader(MappedFile::open(path));
      QFAIL(("accepted " + kind).c_str());
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::Corrupt);
      const std::string m = e.what();
      QVERIFY2(m.find(path) != std::string::npos, m.c_str());
      QVERIFY2(m.find(kind == "duplicates" ? "'dup'" : "'b'") != std::string::npos, m.c_str());
      QVERIFY2(
          m.find(kind == "duplicates" ? "appears twice" : "shares its local header") != std::string::npos,
          m.c_str());
    }
  }
}

void TestZip::reads_sparse_archive_beyond_4gib() {
  test::TempDir dir;
  const std::string path = dir.file("sparse.zip");
  CKPTDOC_EXPECT_EXIT(test::run_python(fixture_script(), {"sparse", path}), 0);
  bool ok = false;
  const QJsonObject dump = run_json({"dump", path, "--no-testzip", "--max-content", "1000"}, &ok);
  QVERIFY(ok);
  compare_with_python(path, dump, true);
  ZipReader reader(MappedFile::open(path));
  const ZipEntry* huge = reader.find("huge");
  const ZipEntry* tail = reader.find("tail");
  QVERIFY(huge && tail);
  QCOMPARE(huge->size, (uint64_t{1} << 32) + 10);
  QVERIFY(tail->header_offset > 0xFFFFFFFFu);
  // zipfile seeks back to fill in the local header, so no data descriptor follows the big record.
  QCOMPARE(tail->header_offset, huge->data_offset + huge->size);
  const auto data = reader.data(*tail);
  QCOMPARE(std::string(data.begin(), data.end()), std::string("after four gibibytes"));
}

void TestZip::tolerates_trailing_bytes() {
  QVERIFY(ensure_torch_fixtures());
  auto bytes = read_bytes(torch_file("tensor.pt"));
  bytes.insert(bytes.end(), 100, 0x55);
  const std::string path = out_->file("trailing.pt");
  write_bytes(path, bytes);
  ZipReader reader(MappedFile::open(path));
  QCOMPARE(reader.entries().size(), size_t{3});
  for (const ZipEntry& e : reader.entries()) QVERIFY(reader.verify_crc(e));
}

void TestZip::every_truncation_throws() {
  QVERIFY(ensure_torch_fixtures());
  for (const char* name : {"tensor.pt", "state.pt"}) {
    const auto bytes = read_bytes(torch_file(name));
    const std::string path = out_->file("truncated.pt");
    for (size_t len = 0; len < bytes.size(); ++len) {
      // A new file each time: ext4 flushes a file truncated and rewritten in place when it is closed
      // (auto_da_alloc), seconds of waiting over thousands of prefixes.
      fs::remove(path);
      write_bytes(path, std::span(bytes).first(len));
      try {
        ZipReader reader(MappedFile::open(path));
        QFAIL(qPrintable(QString("%1 truncated to %2 bytes was accepted").arg(name).arg(len)));
      } catch (const Error& e) {
        if (std::string(e.what()).find(path) == std::string::npos) QFAIL(e.what());
        // Every prefix of a zip is a zip cut short, not some other damage.
        if (e.kind() != ErrorKind::Truncated)
          QFAIL(qPrintable(
              QString("%1 bytes: kind %2: %3").arg(len).arg(kind_name(e.kind()).data()).arg(e.what())));
      }
    }
  }
}

void TestZip::out_of_range_offsets_are_clear_errors() {
  QVERIFY(ensure_torch_fixtures());
  const auto good = read_bytes(torch_file("tensor.pt"));
  const uint64_t cd = find_sig(good, "PK\x01\x02");
  const uint64_t z64 = find_sig(good, "PK\x06\x06");
  const uint64_t locator = find_sig(good, "PK\x06\x07");
  QVERIFY(cd != UINT64_MAX && z64 != UINT64_MAX && locator != UINT64_MAX);
  const uint64_t cdh1 = cd + 46 + get16(good, cd + 28) + get16(good, cd + 30);
  const std::string path = out_->file("damaged.pt");
  int attempt = 0;

  const auto expect = [&](const std::function<void(std::vector<uint8_t>&)>& damage,
                          std::initializer_list<const char*> words) {
    auto bytes = good;
    damage(bytes);
    write_bytes(path, bytes);
    const std::string msg = open_error(path);
    QVERIFY2(!msg.empty(), qPrintable(QString("damaged archive %1 was accepted").arg(++attempt)));
    QVERIFY2(msg.find(path) != std::string::npos, msg.c_str());
    for (const char* w : words)
      QVERIFY2(msg.find(w) != std::string::npos, (msg + "  [wanted: " + w + "]").c_str());
  };

  expect([&](auto& b) { put64(b, z64 + 48, 1000000); }, {"central directory", "offset 1000000", "runs past"});
  expect(
      [&](auto& b) {
        put64(b, z64 + 32, 1000000000);
        put64(b, z64 + 24, 1000000000);
      },
      {"too small for 1000000000 entries"});
  expect([&](auto& b) { put32(b, cd + 42, 5000); },
         {"tensor/data.pkl", "local header at offset 5000", "744 bytes"});
  expect(
      [&](auto& b) {
        put32(b, cdh1 + 20, 100000);
        put32(b, cdh1 + 24, 100000);
      },
      {"tensor/data/0", "100000 bytes", "start of the central directory at offset "});
  expect([&](auto& b) { put32(b, cdh1 + 20, 23); },
         {"tensor/data/0", "compressed size 23 differs", "uncompressed size 24"});
  expect([&](auto& b) { b[get32(good, cdh1 + 42)] = 'Q'; },
         {"tensor/data/0", "expected signature \"PK\\x03\\x04\"", "found \"QK\\x03\\x04\""});
  expect([&](auto& b) { b[cdh1] = 'X'; }, {"central directory entry 1", "expected signature"});
  expect([&](auto& b) { b[cdh1 + 31] = 0x7F; },
         {"central directory entry 1", "run past the end of the central directory"});
  expect([&](auto& b) { b[z64] = 'X'; }, {"ZIP64 locator", "points to offset"});
  expect([&](auto& b) { b[b.size() - 2] = 9; }, {"declares a 9-byte comment"});
  expect([&](auto& b) { b[cd + 8] |= 1; }, {"tensor/data.pkl", "encrypted"});

  // A wrong ZIP64 end-record offset in the locator is tolerated when the record sits right before it (miniz).
  auto moved = good;
  put64(moved, locator + 8, 12345);
  write_bytes(path, moved);
  QCOMPARE(open_error(path), std::string());
}

void TestZip::rejects_non_zip_input() {
  test::TempDir dir;
  const std::string empty = dir.file("empty.bin");
  test::write_text(empty, "");
  std::string msg = open_error(empty);
  QVERIFY2(msg.find("at least 22 bytes") != std::string::npos && msg.find("0 bytes") != std::string::npos,
           msg.c_str());
  const std::string junk = dir.file("junk.bin");
  test::write_text(junk, std::string(100000, 'x'));
  msg = open_error(junk);
  QVERIFY2(msg.find("no end of central directory record") != std::string::npos &&
               msg.find(junk) != std::string::npos,
           msg.c_str());
  QVERIFY(!ZipReader::looks_like_zip(as_bytes("PK\x03")));
  QVERIFY(!ZipReader::looks_like_zip(as_bytes("\x80\x02PK")));
  QVERIFY(ZipReader::looks_like_zip(as_bytes("PK\x03\x04rest")));
}

void TestZip::writer_output_passes_python_zipfile() {
  test::TempDir dir;
  const std::string path = dir.file("written.zip");
  std::mt19937 rng(3);
  std::vector<uint8_t> random(3 << 20);
  for (auto& b : random) b = static_cast<uint8_t>(rng());
  {
    AtomicFile file(path);
    ZipWriter writer(file);
    writer.add("archive/data.pkl", as_bytes("not really a pickle"));
    writer.add("archive/empty", {});
    writer.add_streamed("archive/data/0", random.size(), [&](ByteSink& sink) {
      for (size_t at = 0; at < random.size(); at += 100000) {
        QCOMPARE(sink.position(), uint64_t{at});
        sink.write(std::span(random).subspan(at, std::min<size_t>(100000, random.size() - at)));
      }
    });
    writer.add("archive/\xc3\xa9t\xc3\xa9", as_bytes("utf-8 name"));
    writer.add("archive/version", as_bytes("3\n"));
    writer.finish();
    file.commit();
  }
  bool ok = false;
  const QJsonObject dump = run_json({"dump", path, "--max-content", std::to_string(8 << 20)}, &ok);
  QVERIFY(ok);
  QVERIFY2(dump["testzip"].isNull(), qPrintable(dump["testzip"].toString()));
  const QJsonArray entries = dump["entries"].toArray();
  QCOMPARE(entries.size(), 5);
  QCOMPARE(entries[3].toObject()["name"].toString(), QString::fromUtf8("archive/\xc3\xa9t\xc3\xa9"));
  QCOMPARE(entries[1].toObject()["flags"].toInt(), 0x0800);
  QCOMPARE(entries[0].toObject()["flags"].toInt(), 0x0808);
  QCOMPARE(from_hex(entries[2].toObject()["hex"].toString()), random);
  for (const auto& v : entries)
    QCOMPARE(static_cast<uint64_t>(v.toObject()["data_offset"].toDouble()) % 64, 0u);
  compare_with_python(path, dump, true);
}

void TestZip::writer_aligns_data_for_any_alignment() {
  for (uint64_t alignment : {1u, 7u, 64u, 4096u, 32768u}) {
    VectorSink out;
    ZipWriter writer(out, alignment);
    for (int i = 0; i < 20; ++i) {
      const std::string name(static_cast<size_t>(1 + i * 7), static_cast<char>('a' + i));
      writer.add(name, std::vector<uint8_t>(static_cast<size_t>(i * 13), static_cast<uint8_t>(i)));
    }
    writer.finish();
    test::TempDir dir;
    write_bytes(dir.file("a.zip"), out.data);
    ZipReader reader(MappedFile::open(dir.file("a.zip")));
    QCOMPARE(reader.entries().size(), size_t{20});
    for (const ZipEntry& e : reader.entries()) {
      QCOMPARE(e.data_offset % alignment, 0u);
      QVERIFY(reader.verify_crc(e));
      // The padding is an "FB" extra field of 'Z' bytes, the last field of the local header.
      const uint64_t name_end = e.header_offset + 30 + e.name.size();
      QCOMPARE(get16(out.data, name_end), uint16_t{0x4246});
      QCOMPARE(name_end + 4 + get16(out.data, name_end + 2), e.data_offset);
      QVERIFY(get16(out.data, name_end + 2) < alignment);
    }
  }
  QVERIFY_THROWS_EXCEPTION(Error, [] {
    VectorSink s;
    ZipWriter w(s, 0);
  }());
  QVERIFY_THROWS_EXCEPTION(Error, [] {
    VectorSink s;
    ZipWriter w(s, 65536);
  }());
}

void TestZip::writer_streamed_size_mismatch_throws() {
  const std::vector<uint8_t> ten(10, 1);
  {
    VectorSink out;
    ZipWriter writer(out);
    try {
      writer.add_streamed("short", 11, [&](ByteSink& s) { s.write(ten); });
      QFAIL("a short record was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("expected 11 bytes, found 10") != std::string::npos, e.what());
    }
    // The archive is incomplete now: nothing more may be added or finished.
    QVERIFY_THROWS_EXCEPTION(Error, writer.add("next", ten));
    QVERIFY_THROWS_EXCEPTION(Error, writer.finish());
  }
  {
    VectorSink out;
    ZipWriter writer(out);
    const size_t before = out.data.size();
    try {
      writer.add_streamed("long", 9, [&](ByteSink& s) { s.write(ten); });
      QFAIL("a long record was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("more than the declared 9 bytes") != std::string::npos, e.what());
    }
    // The extra bytes never reached the archive: only the local header was written.
    QCOMPARE(out.data.size() - before, size_t{64});
  }
}

void TestZip::writer_refuses_misuse() {
  VectorSink out;
  ZipWriter writer(out);
  writer.add("a", as_bytes("x"));
  QVERIFY_THROWS_EXCEPTION(Error, writer.add("a", as_bytes("y")));
  QVERIFY_THROWS_EXCEPTION(Error, writer.add("", as_bytes("y")));
  QVERIFY_THROWS_EXCEPTION(Error, writer.add(std::string(70000, 'n'), as_bytes("y")));
  writer.add("b", {});  // a refused name leaves the writer usable
  writer.finish();
  QVERIFY_THROWS_EXCEPTION(Error, writer.add("c", as_bytes("z")));
  QVERIFY_THROWS_EXCEPTION(Error, writer.finish());
}

// The layout torch 1.13 wrote for {'big': uint8[2**32+100], 'small': float[3]} (torch-format.md §1.3), with a
// data.pkl of the size that puts the big record's header at offset 335 as in that dump.
void TestZip::writer_zip64_layout_beyond_4gib() {
  test::TempDir dir;
  const std::string path = dir.file("big.pt");
  const uint64_t big = (uint64_t{1} << 32) + 100;
  uint32_t big_crc = 0;
  {
    HoleSink sink(path);
    ZipWriter writer(sink);
    writer.add("big/data.pkl", std::vector<uint8_t>(255, 0x80));
    writer.add_streamed("big/data/0", big, [&](ByteSink& s) {
      for (uint64_t left = big; left > 0;) {
        const uint64_t n = std::min<uint64_t>(left, sink.zeros.size());
        s.write(std::span(sink.zeros).first(static_cast<size_t>(n)));
        left -= n;
      }
    });
    writer.add("big/data/1", std::vector<uint8_t>(12, 0x3f));
    writer.add("big/version", as_bytes("3\n"));
    writer.finish();
    QVERIFY(sink.close());
  }
  ZipReader reader(MappedFile::open(path));
  const auto& file = *reader.file();
  const auto at = [&](uint64_t offset, uint64_t n) { return file.slice(offset, n); };
  QCOMPARE(reader.entries().size(), size_t{4});
  const ZipEntry& e0 = reader.entries()[1];
  const ZipEntry& e1 = reader.entries()[2];
  const ZipEntry& ver = reader.entries()[3];
  QCOMPARE(e0.header_offset, uint64_t{335});
  QCOMPARE(get16(at(335, 30), 28), uint16_t{73});  // ZIP64 extra (4+16) + FB (4+49)
  QCOMPARE(get16(at(335 + 30 + 10, 4), 2), uint16_t{16});
  QCOMPARE(get64(at(335 + 30 + 10 + 4, 16), 0), big);
  QCOMPARE(get64(at(335 + 30 + 10 + 4, 16), 8), uint64_t{0});  // compressed size 0, as miniz writes it
  QCOMPARE(e0.data_offset, uint64_t{448});
  QCOMPARE(e0.size, big);
  const auto dd = at(4294967844u, 24);  // 64-bit data descriptor
  QCOMPARE(get32(dd, 0), 0x08074b50u);
  QCOMPARE(get64(dd, 8), big);
  QCOMPARE(get64(dd, 16), big);
  big_crc = get32(dd, 4);
  QCOMPARE(big_crc, e0.crc32);
  QCOMPARE(e1.header_offset, uint64_t{4294967868u});
  QCOMPARE(get16(at(e1.header_offset, 30), 28), uint16_t{28});  // ZIP64 extra (4+8, the offset) + FB (4+12)
  QCOMPARE(get64(at(e1.header_offset + 30 + 10 + 4, 8), 0), e1.header_offset);
  QCOMPARE(e1.data_offset, uint64_t{4294967936u});
  const auto dd1 = at(e1.data_offset + 12, 24);  // 64-bit although the record is small: it lies past 4 GiB
  QCOMPARE(get32(dd1, 0), 0x08074b50u);
  QCOMPARE(get64(dd1, 8), uint64_t{12});
  QCOMPARE(ver.header_offset, e1.data_offset + 12 + 24);
  const auto eocd = at(file.size() - 22, 22);
  QCOMPARE(get16(eocd, 10), uint16_t{4});
  QCOMPARE(get32(eocd, 12), 0x10Fu);
  QCOMPARE(get32(eocd, 16), 0xFFFFFFFFu);
  for (const ZipEntry& e : reader.entries()) QCOMPARE(e.data_offset % 64, 0u);
  QVERIFY(reader.verify_crc(e1));
  QVERIFY(reader.verify_crc(ver));

  bool ok = false;
  const QJsonObject dump = run_json({"dump", path, "--no-testzip", "--max-content", "1000"}, &ok);
  QVERIFY(ok);
  compare_with_python(path, dump, true);
  const auto r = test::run_python(fixture_script(), {"crc_zeros", std::to_string(big)});
  CKPTDOC_EXPECT_EXIT(r, 0);
  QCOMPARE(std::stoull(r.out), uint64_t{big_crc});
}

void TestZip::atomic_commit_renames() {
  test::TempDir dir;
  const std::string path = dir.file("out.bin");
  std::vector<uint8_t> big(3 << 20, 0x11);  // larger than the buffer: written directly
  {
    AtomicFile f(path);
    f.write(as_bytes("head"));
    f.write(big);
    f.write(as_bytes("tail"));
    QCOMPARE(f.position(), uint64_t{big.size() + 8});
    QVERIFY(!fs::exists(path));
    QCOMPARE(dir_names(dir.path()).size(), size_t{1});  // the temp file
    f.commit();
    QVERIFY_THROWS_EXCEPTION(Error, f.write(as_bytes("late")));
  }
  QCOMPARE(dir_names(dir.path()), std::vector<std::string>{"out.bin"});
  const auto bytes = read_bytes(path);
  QCOMPARE(bytes.size(), big.size() + 8);
  QCOMPARE(std::string(bytes.begin(), bytes.begin() + 4), std::string("head"));
  QCOMPARE(std::string(bytes.end() - 4, bytes.end()), std::string("tail"));
}

void TestZip::atomic_destructor_removes_temp() {
  test::TempDir dir;
  const std::string path = dir.file("out.bin");
  test::write_text(path, "precious");
  {
    AtomicFile f(path);
    f.write(std::vector<uint8_t>(2 << 20, 1));
    QCOMPARE(dir_names(dir.path()).size(), size_t{2});
  }
  QCOMPARE(dir_names(dir.path()), std::vector<std::string>{"out.bin"});
  QCOMPARE(test::read_text(path), std::string("precious"));
}

void TestZip::atomic_enospc_names_path_and_leaves_no_temp() {
  test::TempDir dir;
  const std::string path = dir.file("out.bin");
  for (size_t size : {size_t{100}, size_t{3} << 20}) {  // failing in commit's flush, and in write itself
    FakeIo io;
    io.fail_write_after = 0;
    {
      ScopedFileIo scoped(io);
      AtomicFile f(path);  // picks up current_io()
      try {
        f.write(std::vector<uint8_t>(size, 2));
        f.commit();
        QFAIL("ENOSPC was not reported");
      } catch (const Error& e) {
        QCOMPARE(e.kind(), ErrorKind::Io);
        QCOMPARE(e.file(), path);
        const std::string msg = e.what();
        QVERIFY2(msg.find(path) != std::string::npos, msg.c_str());
        QVERIFY2(msg.find("write: No space left on device") != std::string::npos, msg.c_str());
      }
    }
    QVERIFY(dir_names(dir.path()).empty());
    QCOMPARE(io.unlinked.size(), size_t{1});
  }
}

void TestZip::atomic_short_write_then_failure_blocks_commit() {
  test::TempDir dir;
  const std::string path = dir.file("out.bin");
  FakeIo io;
  io.half_writes = true;
  io.fail_write_after = 1;  // half the buffer reaches the file, then the disk is full
  {
    AtomicFile f(path, io);
    f.write(std::vector<uint8_t>(1000, 3));
    QVERIFY_THROWS_EXCEPTION(Error, f.commit());
    io.fail_write_after = -1;  // the disk has room again, but the temp file already lost its consistency
    try {
      f.commit();
      QFAIL("committed a file after a failed write");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("earlier write failed") != std::string::npos, e.what());
    }
    QVERIFY_THROWS_EXCEPTION(Error, f.write(as_bytes("more")));
  }
  QVERIFY(dir_names(dir.path()).empty());
}

CKPTDOC_TEST_MAIN_APPLESS(TestZip)
#include "test_zip.moc"
