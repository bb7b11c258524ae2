// HDF5 export, read back by h5py (tests/fixtures/check_hdf5.py) and compared exactly.
#include <sys/resource.h>

#include <QTest>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <numbers>

#include "ckptdoc/error.h"
#include "ckptdoc/format/hdf5_writer.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

template <typename T>
std::vector<uint8_t> le_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

Tensor owned_tensor(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  return Tensor::from_bytes(dtype, std::move(shape), std::move(bytes));
}

// The tensors check_hdf5.py expects, by the same formulas.
std::vector<NamedTensor> reference_tensors() {
  std::vector<NamedTensor> out;
  std::vector<float> f32;
  for (int i = 0; i < 6; ++i) f32.push_back(static_cast<float>(i) * 0.25f - 1.0f);
  out.push_back({"fc1.weight", owned_tensor(DType::F32, {2, 3}, le_bytes(f32))});
  std::vector<uint16_t> f16;
  for (float v : {0.5f, -2.0f, 65504.0f, 6.103515625e-05f, -0.0f, 5.9604644775390625e-08f})
    f16.push_back(float_to_half(v));
  out.push_back({"fc1.bias", owned_tensor(DType::F16, {6}, le_bytes(f16))});
  std::vector<uint16_t> bf16;
  for (float v : {1.0f, -2.5f, 3.140625f, 1.2676506002282294e30f}) bf16.push_back(float_to_bf16(v));  // 2^100
  out.push_back({"model.layers.0.attn.w", owned_tensor(DType::BF16, {2, 2}, le_bytes(bf16))});
  out.push_back({"double", owned_tensor(DType::F64, {}, le_bytes(std::vector<double>{2.5}))});
  out.push_back(
      {"steps", owned_tensor(DType::I64, {3},
                             le_bytes(std::vector<int64_t>{-1, int64_t{1} << 40, 9007199254740993}))});
  out.push_back(
      {"i32", owned_tensor(DType::I32, {2, 2}, le_bytes(std::vector<int32_t>{INT32_MIN, 1, 2, INT32_MAX}))});
  out.push_back({"i16", owned_tensor(DType::I16, {3}, le_bytes(std::vector<int16_t>{-32768, 0, 32767}))});
  out.push_back({"i8", owned_tensor(DType::I8, {2}, le_bytes(std::vector<int8_t>{-128, 127}))});
  out.push_back({"u8", owned_tensor(DType::U8, {4}, {0, 1, 254, 255})});
  out.push_back({"mask", owned_tensor(DType::Bool, {3}, {1, 0, 1})});
  out.push_back({"cplx", owned_tensor(DType::C64, {2}, le_bytes(std::vector<float>{1, 2, -3.5f, -0.25f}))});
  out.push_back(
      {"cplx128", owned_tensor(DType::C128, {1}, le_bytes(std::vector<double>{std::numbers::pi, 1e-300}))});
  out.push_back({"empty", owned_tensor(DType::F32, {0, 4}, {})});

  std::vector<float> grid;
  for (int i = 0; i < 12; ++i) grid.push_back(static_cast<float>(i));
  Tensor t = owned_tensor(DType::F32, {3, 4}, le_bytes(grid));
  t.shape = {4, 3};  // transpose view: not contiguous
  t.strides = {1, 4};
  out.push_back({"t", t});

  auto ps = std::make_shared<Storage>();
  ps->dtype = DType::I32;
  ps->numel = 2;
  ps->producer = [](ByteSink& sink) { sink.write(le_bytes(std::vector<int32_t>{7, -7})); };
  Tensor p;
  p.dtype = DType::I32;
  p.shape = {2};
  p.strides = {1};
  p.storage = ps;
  out.push_back({"produced", p});
  return out;
}

const std::map<std::string, std::string> kAttributes{{"format", "pt"}, {"source", "ünïcode ✓"}};

}  // namespace

class TestHdf5 : public QObject {
  Q_OBJECT

 private slots:
  void writesDatasetsThatH5pyReadsExactly() {
    test::TempDir dir;
    const std::string path = dir.file("model.h5");
    write_hdf5_file(path, reference_tensors(), kAttributes);
    const auto r = test::run_python(test::script("fixtures/check_hdf5.py"), {path});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"model.h5"});
  }

  void replacesAnExistingFile() {
    test::TempDir dir;
    const std::string path = dir.file("model.h5");
    test::write_text(path, "old contents");
    write_hdf5_file(path, reference_tensors(), kAttributes);
    const auto r = test::run_python(test::script("fixtures/check_hdf5.py"), {path});
    CKPTDOC_EXPECT_EXIT(r, 0);
  }

  void rejectsUnexportableInput_data() {
    QTest::addColumn<QStringList>("names");
    QTest::addColumn<QString>("message");
    QTest::newRow("dataset then group")
        << QStringList{"a", "a.b"} << "needs /a to be a group, but tensor 'a'";
    QTest::newRow("group then dataset")
        << QStringList{"a.b.c", "a.b"} << "which is the group of tensor 'a.b.c'";
    QTest::newRow("duplicate") << QStringList{"x.y", "x.y"} << "given more than once";
    QTest::newRow("empty part") << QStringList{"a..b"} << "empty part";
    QTest::newRow("leading dot") << QStringList{".a"} << "empty part";
    QTest::newRow("trailing dot") << QStringList{"a."} << "empty part";
    QTest::newRow("empty name") << QStringList{""} << "empty name";
    QTest::newRow("slash") << QStringList{"a/b"} << "containing '/'";
  }
  void rejectsUnexportableInput() {
    QFETCH(QStringList, names);
    QFETCH(QString, message);
    const Tensor t = owned_tensor(DType::F32, {1}, le_bytes(std::vector<float>{1}));
    std::vector<NamedTensor> ts;
    for (const auto& n : names) ts.push_back({n.toStdString(), t});
    test::TempDir dir;
    const std::string path = dir.file("out.h5");
    test::write_text(path, "previous");
    try {
      write_hdf5_file(path, ts);
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
      QCOMPARE(e.file(), path);
    }
    QCOMPARE(test::read_text(path), std::string("previous"));
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"out.h5"});
  }

  void failureMidWriteLeavesOldFileAndNoTemp() {
    auto bad = std::make_shared<Storage>();
    bad->dtype = DType::F32;
    bad->numel = 4;
    bad->producer = [](ByteSink&) { throw Error("", "", "source vanished"); };
    Tensor t;
    t.shape = {4};
    t.strides = {1};
    t.storage = bad;
    // And a tensor whose view runs past its storage.
    Tensor short_view = owned_tensor(DType::F32, {2}, le_bytes(std::vector<float>{1, 2}));
    short_view.shape = {5};
    for (const auto& [extra, message] : std::vector<std::pair<NamedTensor, std::string>>{
             {{"late.failure", t}, "source vanished"}, {{"short", short_view}, "storage holding 8"}}) {
      auto ts = reference_tensors();
      ts.push_back(extra);
      test::TempDir dir;
      const std::string path = dir.file("keep.h5");
      test::write_text(path, "keep me");
      try {
        write_hdf5_file(path, ts, kAttributes);
        QFAIL("no error");
      } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find(message) != std::string::npos, e.what());
        QCOMPARE(e.file(), path);
      }
      QCOMPARE(test::read_text(path), std::string("keep me"));
      QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"keep.h5"});
    }
  }

  void reportsUnwritableDirectory() {
    try {
      write_hdf5_file("/nonexistent-dir-ckptdoc/out.h5", reference_tensors());
      QFAIL("no error");
    } catch (const Error& e) {
      QCOMPARE(e.file(), std::string("/nonexistent-dir-ckptdoc/out.h5"));
      QVERIFY2(std::string(e.what()).find("H5Fcreate: No such file or directory") != std::string::npos,
               e.what());
    }
  }

  // A write the system refuses (disk full; here a file-size limit, which fails the same way with EFBIG) is
  // one line naming the file and the system's words, as the other writers say it, not HDF5's stack of
  // messages.
  void aRefusedWriteIsOneLine() {
    test::TempDir dir;
    const std::string path = dir.file("big.h5");
    std::vector<float> values(1 << 20, 1.5f);
    const std::vector<NamedTensor> ts{{"w", owned_tensor(DType::F32, {1 << 20}, le_bytes(values))}};
    struct rlimit old {};
    ::getrlimit(RLIMIT_FSIZE, &old);
    const auto previous = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old;
    small.rlim_cur = 256 * 1024;
    ::setrlimit(RLIMIT_FSIZE, &small);
    std::string message;
    try {
      write_hdf5_file(path, ts);
    } catch (const Error& e) {
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, previous);
    QVERIFY2(message.find(path) != std::string::npos, message.c_str());
    QVERIFY2(message.find(std::strerror(EFBIG)) != std::string::npos, message.c_str());
    QVERIFY2(message.find('\n') == std::string::npos && message.find("H5FD") == std::string::npos &&
                 message.size() < 300,
             message.c_str());
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{});  // no temp file left
  }
};

CKPTDOC_TEST_MAIN(TestHdf5)
#include "test_hdf5.moc"
