// safetensors reading and writing against files built by a spec-only Python writer/checker
// (tests/fixtures/make_safetensors.py), plus hostile inputs that must each fail with a clear error.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"
#include "generated_fixture.h"
#include "test_support.h"

using namespace ckptdoc;
namespace fs = std::filesystem;

namespace {

std::string fixture_script() {
  return test::script("fixtures/make_safetensors.py");
}

QJsonObject read_json(const std::string& path) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(test::read_text(path))).object();
}

std::vector<uint8_t> from_hex(const QString& hex) {
  const QByteArray b = QByteArray::fromHex(hex.toLatin1());
  return {b.begin(), b.end()};
}

// The bytes a file-backed tensor views, straight from the mapping.
std::span<const uint8_t> mapped_bytes(const Tensor& t) {
  return t.storage->bytes();
}

// Element i as a double (floating dtypes, complex as interleaved re/im) or integer.
double float_at(DType d, const uint8_t* p, size_t i) {
  switch (d) {
    case DType::F32:
    case DType::C64: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::F64: {
      double f;
      std::memcpy(&f, p + 8 * i, 8);
      return f;
    }
    case DType::F16:
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return d == DType::F16 ? half_to_float(h) : bf16_to_float(h);
    }
    default:
      return NAN;
  }
}

int64_t int_at(DType d, const uint8_t* p, size_t i) {
  switch (d) {
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::I16: {
      int16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    case DType::I8:
      return static_cast<int8_t>(p[i]);
    default:
      return p[i];  // U8, Bool
  }
}

// Checks one read tensor against its description in NAME.expected.json: header fields, bytes, values.
void compare_entry(const SafetensorsEntry& e, const QJsonObject& exp) {
  const std::string name = e.name;
  QCOMPARE(QString::fromUtf8(safetensors_name(e.tensor.dtype)), exp["dtype"].toString());
  std::vector<int64_t> shape;
  for (const auto& d : exp["shape"].toArray()) shape.push_back(d.toInteger());
  QCOMPARE(e.tensor.shape, shape);
  QCOMPARE(e.begin, static_cast<uint64_t>(exp["begin"].toInteger()));
  QCOMPARE(e.end, static_cast<uint64_t>(exp["end"].toInteger()));
  QCOMPARE(e.tensor.storage_offset, int64_t{0});
  const auto bytes = mapped_bytes(e.tensor);
  const auto want = from_hex(exp["hex"].toString());
  QVERIFY2(std::equal(bytes.begin(), bytes.end(), want.begin(), want.end()), name.c_str());
  const QJsonArray values = exp["values"].toArray();
  const bool floating = is_floating(e.tensor.dtype) || e.tensor.dtype == DType::C64;
  for (qsizetype i = 0; i < values.size(); ++i) {
    if (floating) {
      const double got = float_at(e.tensor.dtype, bytes.data(), static_cast<size_t>(i));
      QVERIFY2(got == values[i].toDouble() || (std::isnan(got) && std::isnan(values[i].toDouble())),
               qPrintable(
                   QString("%1[%2]: %3 != %4").arg(name.c_str()).arg(i).arg(got).arg(values[i].toDouble())));
    } else {
      QCOMPARE(int_at(e.tensor.dtype, bytes.data(), static_cast<size_t>(i)), values[i].toInteger());
    }
  }
}

Tensor owned_tensor(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  return Tensor::from_bytes(dtype, std::move(shape), std::move(bytes));
}

template <typename T>
std::vector<uint8_t> le_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A file from raw parts: the 8-byte length (or an explicit one), the header text, then `data` bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes,
               std::optional<uint64_t> length = std::nullopt) {
  std::string out(8, '\0');
  const uint64_t n = length.value_or(header.size());
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  out += header;
  out.append(data_bytes, '\x11');
  test::write_text(path, out);
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT

 private:
  std::string fixtures_;  // make_safetensors.py make's files, generated once per build tree (read-only)
  std::string fx(const std::string& name) const { return fixtures_ + "/" + name; }

  // C++-built tensors that make_safetensors.py check-cpp knows the values of.
  static std::vector<NamedTensor> built_tensors() {
    std::vector<NamedTensor> out;
    std::vector<float> f32;
    for (int i = 0; i < 6; ++i) f32.push_back(static_cast<float>(i) * 0.25f - 1.0f);
    out.push_back({"w.f32", owned_tensor(DType::F32, {2, 3}, le_bytes(f32))});

    std::vector<float> grid;
    for (int i = 0; i < 12; ++i) grid.push_back(static_cast<float>(i));
    Tensor t = owned_tensor(DType::F32, {3, 4}, le_bytes(grid));
    t.shape = {4, 3};  // the transpose: not contiguous
    t.strides = {1, 4};
    out.push_back({"w.t", t});

    std::vector<uint16_t> f16;
    for (float v : {0.5f, -2.0f, 65504.0f, 6.103515625e-05f, -0.0f}) f16.push_back(float_to_half(v));
    out.push_back({"w.f16", owned_tensor(DType::F16, {5}, le_bytes(f16))});

    std::vector<uint16_t> bf16;
    for (float v : {1.0f, -2.5f, 3.140625f, 0.0f}) bf16.push_back(float_to_bf16(v));
    out.push_back({"w.bf16", owned_tensor(DType::BF16, {4}, le_bytes(bf16))});

    // A producer-backed tensor, as streaming writers use.
    auto ps = std::make_shared<Storage>();
    ps->dtype = DType::I64;
    ps->numel = 3;
    ps->producer = [](ByteSink& sink) {
      sink.write(le_bytes(std::vector<int64_t>{-1, int64_t{1} << 40, 7}));
    };
    Tensor p;
    p.dtype = DType::I64;
    p.shape = {3};
    p.strides = {1};
    p.storage = ps;
    out.push_back({"p.i64", p});

    out.push_back({"scalar", owned_tensor(DType::F64, {}, le_bytes(std::vector<double>{2.5}))});
    out.push_back({"empty", owned_tensor(DType::I32, {0, 4}, {})});
    out.push_back({"flags", owned_tensor(DType::Bool, {3}, {1, 0, 1})});

    Tensor off = owned_tensor(DType::I16, {6}, le_bytes(std::vector<int16_t>{0, 1, 2, 3, 4, 5}));
    off.shape = {3};
    off.storage_offset = 2;
    out.push_back({"offset", off});
    return out;
  }

 private slots:
  void initTestCase() {
    const auto f =
        test::generated_fixture("safetensors", {"fixtures/make_safetensors.py"}, [](const std::string& dir) {
          return test::run_python(fixture_script(), {"make", dir});
        });
    QVERIFY2(f.error.empty(), f.error.c_str());
    fixtures_ = f.dir;
  }

  void readsPythonWrittenFile() {
    const auto f = SafetensorsFile::open(fx("ref.safetensors"));
    const QJsonObject exp = read_json(fx("ref.expected.json"));
    QCOMPARE(f.metadata.size(), size_t{2});
    QCOMPARE(f.metadata.at("format"), std::string("pt"));
    QCOMPARE(f.metadata.at("note"), std::string("ünïcode ✓"));
    const QJsonObject tensors = exp["tensors"].toObject();
    QCOMPARE(f.entries.size(), static_cast<size_t>(tensors.size()));
    // Entries come in data order, which here differs from the header's key order.
    const QJsonArray order = exp["order"].toArray();
    for (qsizetype i = 0; i < order.size(); ++i) {
      QCOMPARE(QString::fromStdString(f.entries[static_cast<size_t>(i)].name), order[i].toString());
      compare_entry(f.entries[static_cast<size_t>(i)], tensors[order[i].toString()].toObject());
    }
    QCOMPARE(f.header_size % 8, uint64_t{0});
    QCOMPARE(f.entries.back().end + 8 + f.header_size, f.file->size());
  }

  void readsWhitespaceUnalignedScalarAndEmpty() {
    const auto f = SafetensorsFile::open(fx("loose.safetensors"));
    const QJsonObject exp = read_json(fx("loose.expected.json"));
    QVERIFY(f.metadata.empty());
    const QJsonObject tensors = exp["tensors"].toObject();
    QCOMPARE(f.entries.size(), size_t{5});
    for (const auto& e : f.entries) compare_entry(e, tensors[QString::fromStdString(e.name)].toObject());
    const auto scalar =
        std::find_if(f.entries.begin(), f.entries.end(), [](auto& e) { return e.name == "scalar"; });
    QVERIFY(scalar->tensor.shape.empty());
    QVERIFY(scalar->tensor.strides.empty());
  }

  void alignedTensorsAreZeroCopyViews() {
    const auto f = SafetensorsFile::open(fx("ref.safetensors"));
    const auto whole = f.file->bytes();
    int mapped = 0, copied = 0;
    for (const auto& e : f.entries) {
      const auto& s = *e.tensor.storage;
      const uint64_t at = 8 + f.header_size + e.begin;
      QCOMPARE(s.nbytes(), e.end - e.begin);
      if (at % element_size(s.dtype) == 0) {  // views on the map
        QVERIFY(s.file == f.file);
        QVERIFY(!s.owned);
        QCOMPARE(s.file_offset, at);
        QVERIFY(mapped_bytes(e.tensor).data() == whole.data() + s.file_offset);
        ++mapped;
      } else {  // copied, so that readers see an aligned array
        QVERIFY2(!s.file && s.owned, e.name.c_str());
        QVERIFY(reinterpret_cast<uintptr_t>(s.bytes().data()) % element_size(s.dtype) == 0);
        QVERIFY(std::equal(s.bytes().begin(), s.bytes().end(), whole.begin() + static_cast<ptrdiff_t>(at)));
        ++copied;
      }
    }
    QVERIFY(mapped > 0 && copied > 0);  // the fixture has both
    const auto& w = std::find_if(f.entries.begin(), f.entries.end(), [](auto& e) {
                      return e.name == "model.embed.weight";
                    })->tensor;
    QCOMPARE(w.strides, (std::vector<int64_t>{3, 1}));
  }

  void roundTripIsAcceptedByReferenceChecker() {
    const auto f = SafetensorsFile::open(fx("ref.safetensors"));
    std::vector<NamedTensor> tensors;
    for (const auto& e : f.entries) tensors.push_back({e.name, e.tensor});
    test::TempDir dir;
    write_safetensors_file(dir.file("out.safetensors"), tensors, f.metadata);
    const auto r =
        test::run_python(fixture_script(), {"check", dir.file("out.safetensors"), fx("ref.expected.json")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"out.safetensors"});
  }

  void writesBuiltTensorsCheckedByReference() {
    test::TempDir dir;
    const auto tensors = built_tensors();
    write_safetensors_file(dir.file("w.safetensors"), tensors);  // default metadata {"format": "pt"}
    const auto r = test::run_python(fixture_script(), {"check-cpp", dir.file("w.safetensors")});
    CKPTDOC_EXPECT_EXIT(r, 0);

    // And our own reader agrees.
    const auto f = SafetensorsFile::open(dir.file("w.safetensors"));
    QCOMPARE(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
    QCOMPARE(f.entries.size(), tensors.size());
    const auto& t = f.entries[1];
    QCOMPARE(t.name, std::string("w.t"));
    const auto b = mapped_bytes(t.tensor);
    for (size_t i = 0; i < 12; ++i) {  // row-major transpose of arange(12).reshape(3, 4)
      const size_t r0 = i / 3, c0 = i % 3;
      QCOMPARE(float_at(DType::F32, b.data(), i), static_cast<double>(c0 * 4 + r0));
    }
  }

  void writesEmptyFileAndNoMetadata() {
    test::TempDir dir;
    write_safetensors_file(dir.file("e.safetensors"), {}, {});
    const std::string raw = test::read_text(dir.file("e.safetensors"));
    QCOMPARE(raw.size(), size_t{16});
    QCOMPARE(raw.substr(8), std::string("{}      "));
    const auto f = SafetensorsFile::open(dir.file("e.safetensors"));
    QVERIFY(f.entries.empty() && f.metadata.empty());
  }

  void writerRejectsBadInput_data() {
    QTest::addColumn<int>("which");
    QTest::addColumn<QString>("message");
    QTest::newRow("duplicate name") << 0 << "given more than once";
    QTest::newRow("reserved name") << 1 << "reserved";
    QTest::newRow("complex128") << 2 << "complex128";
    QTest::newRow("storage too small") << 3 << "storage holding 8";
    QTest::newRow("producer short") << 4 << "expected 12, found 4";
    QTest::newRow("producer throws") << 5 << "disk on fire";
    QTest::newRow("strides out of storage") << 6 << "strides reach outside";
    QTest::newRow("invalid UTF-8 name") << 7 << "not valid UTF-8";
  }
  void writerRejectsBadInput() {
    QFETCH(int, which);
    QFETCH(QString, message);
    const Tensor ok = owned_tensor(DType::F32, {2}, le_bytes(std::vector<float>{1, 2}));
    std::vector<NamedTensor> ts{{"a", ok}};
    switch (which) {
      case 0:
        ts.push_back({"a", ok});
        break;
      case 1:
        ts.push_back({"__metadata__", ok});
        break;
      case 2:
        ts.push_back({"c", owned_tensor(DType::C128, {1}, std::vector<uint8_t>(16))});
        break;
      case 3: {
        Tensor t = ok;
        t.shape = {3};
        ts.push_back({"big", t});
        break;
      }
      case 4:
      case 5: {
        auto s = std::make_shared<Storage>();
        s->dtype = DType::F32;
        s->numel = 3;
        if (which == 4)
          s->producer = [](ByteSink& sink) { sink.write(std::vector<uint8_t>(4)); };
        else
          s->producer = [](ByteSink&) { throw Error("", "", "disk on fire"); };
        Tensor t;
        t.shape = {3};
        t.strides = {1};
        t.storage = s;
        ts.push_back({"p", t});
        break;
      }
      case 6: {
        Tensor t = ok;
        t.shape = {2, 2};
        t.strides = {1, 2};
        ts.push_back({"s", t});
        break;
      }
      case 7:
        ts.push_back({"bad\xff", ok});
        break;
    }
    test::TempDir dir;
    const std::string path = dir.file("x.safetensors");
    test::write_text(path, "previous contents");
    try {
      write_safetensors_file(path, ts);
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
      QVERIFY2(std::string(e.what()).find(path) != std::string::npos, e.what());
    }
    // The old file is untouched and no temporary file is left behind.
    QCOMPARE(test::read_text(path), std::string("previous contents"));
    QCOMPARE(test::files_in(dir.path()), std::vector<std::string>{"x.safetensors"});
  }

  void looksLikeSafetensors() {
    const std::string ref = test::read_text(fx("ref.safetensors"));
    const auto head = [](const std::string& s) {
      return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()),
                                      std::min<size_t>(s.size(), 64));
    };
    QVERIFY(SafetensorsFile::looks_like_safetensors(head(ref), ref.size()));
    const std::string loose = test::read_text(fx("loose.safetensors"));
    QVERIFY(SafetensorsFile::looks_like_safetensors(head(loose), loose.size()));
    QVERIFY(!SafetensorsFile::looks_like_safetensors(head(ref), 20));  // header would run past the file
    std::string zip("PK\x03\x04", 4);
    zip.append(60, '\0');  // (not `string + string`: GCC 12 warns falsely on it, -Warray-bounds)
    QVERIFY(!SafetensorsFile::looks_like_safetensors(head(zip), zip.size()));
    std::string list = ref;
    list[8] = '[';
    QVERIFY(!SafetensorsFile::looks_like_safetensors(head(list), list.size()));
    QVERIFY(!SafetensorsFile::looks_like_safetensors(head(std::string("\x02\0\0\0\0\0\0\0{", 9)), 9));
  }

  void rejectsInvalidFiles_data() {
    QTest::addColumn<QString>("header");
    QTest::addColumn<int>("data");
    QTest::addColumn<qint64>("length");  // -1: the header's real length
    QTest::addColumn<QString>("message");
    const QString a4 = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
    QTest::newRow("header length past end") << "{}" << 0 << qint64(1000) << "header within the file";
    QTest::newRow("header length over 100MB") << "{}" << 0 << qint64(100000001) << "at most 100000000";
    QTest::newRow("header length 2^64-1") << "{}" << 0 << qint64(-2) << "at most 100000000";
    QTest::newRow("not JSON") << "{not json}" << 0 << qint64(-1) << "not valid JSON";
    QTest::newRow("truncated JSON") << R"({"a":{"dtype":"F32")" << 0 << qint64(-1) << "not valid JSON";
    QTest::newRow("trailing garbage") << "{} x" << 0 << qint64(-1) << "not valid JSON";
    QTest::newRow("not UTF-8") << QString::fromLatin1("{\"a\xff\":1}") << 0 << qint64(-1)
                               << "not valid UTF-8";
    QTest::newRow("not an object") << "[1,2]" << 0 << qint64(-1) << "expected a JSON object";
    QTest::newRow("duplicate tensor")
        << "{" + a4 + "," + a4 + "}" << 4 << qint64(-1) << "header key 'a': key appears more than once";
    QTest::newRow("duplicate metadata")
        << R"({"__metadata__":{},"__metadata__":{}})" << 0 << qint64(-1) << "key '__metadata__': key appears";
    QTest::newRow("duplicate metadata key") << R"({"__metadata__":{"k":"1","k":"2"}})" << 0 << qint64(-1)
                                            << "key '__metadata__' > 'k': key appears more than once";
    QTest::newRow("metadata not strings")
        << R"({"__metadata__":{"k":1}})" << 0 << qint64(-1) << "string value";
    QTest::newRow("metadata not object")
        << R"({"__metadata__":"x"})" << 0 << qint64(-1) << "object of string";
    QTest::newRow("entry not object") << R"({"a":[1]})" << 0 << qint64(-1) << "tensor 'a'";
    QTest::newRow("missing shape") << R"({"a":{"dtype":"F32","data_offsets":[0,4]}})" << 4 << qint64(-1)
                                   << "missing field 'shape'";
    QTest::newRow("unknown field") << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})" << 4
                                   << qint64(-1) << "unknown field 'x'";
    QTest::newRow("unknown dtype") << R"({"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})" << 4
                                   << qint64(-1) << "'F8_E4M3' (unknown";
    QTest::newRow("C128 dtype") << R"({"a":{"dtype":"C128","shape":[1],"data_offsets":[0,16]}})" << 16
                                << qint64(-1) << "'C128' (unknown";
    QTest::newRow("dtype lowercase") << R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})" << 4
                                     << qint64(-1) << "'f32'";
    QTest::newRow("negative shape") << R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})" << 4
                                    << qint64(-1) << "found integer -1";
    QTest::newRow("fractional shape") << R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})" << 4
                                      << qint64(-1) << "non-negative integer";
    QTest::newRow("shape overflow")
        << R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})" << 4
        << qint64(-1) << "overflows";
    QTest::newRow("offsets not a pair")
        << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})" << 4 << qint64(-1) << "[begin, end]";
    QTest::newRow("negative offset") << R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[-1,-1]}})" << 0
                                     << qint64(-1) << "non-negative integer";
    QTest::newRow("end before begin") << R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})" << 4
                                      << qint64(-1) << "end is before begin";
    QTest::newRow("wrong byte count")
        << R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})" << 4 << qint64(-1) << "need 8";
    QTest::newRow("overlap")
        << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})"
        << 6 << qint64(-1) << "overlap";
    QTest::newRow("aliased")
        << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})"
        << 4 << qint64(-1) << "overlap";
    QTest::newRow("gap")
        << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})"
        << 12 << qint64(-1) << "gap: expected begin 4, found 8";
    QTest::newRow("not from zero") << R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})" << 8
                                   << qint64(-1) << "gap: expected begin 0";
    QTest::newRow("trailing bytes") << "{" + a4 + "}" << 6 << qint64(-1) << "2 bytes after the last tensor";
    QTest::newRow("data but no tensors") << "{}" << 3 << qint64(-1) << "3 bytes after the last tensor";
    QTest::newRow("offsets out of bounds")
        << "{" + a4 + "}" << 2 << qint64(-1) << "run past the end of the data";
    QTest::newRow("huge offsets")
        << R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})"
        << 0 << qint64(-1) << "gap";
  }
  void rejectsInvalidFiles() {
    QFETCH(QString, header);
    QFETCH(int, data);
    QFETCH(qint64, length);
    QFETCH(QString, message);
    test::TempDir dir;
    const std::string path = dir.file("bad.safetensors");
    const QByteArray h = header.contains(QChar(0xff)) ? header.toLatin1() : header.toUtf8();
    std::optional<uint64_t> len;
    if (length >= 0) len = static_cast<uint64_t>(length);
    if (length == -2) len = ~uint64_t{0};
    write_raw(path, h.toStdString(), static_cast<size_t>(data), len);
    try {
      SafetensorsFile::open(path);
      QFAIL("opened without error");
    } catch (const Error& e) {
      QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
      QCOMPARE(e.file(), path);
    }
  }

  void rejectsTooShortFile() {
    test::TempDir dir;
    for (const auto& content : {std::string(), std::string("\x02\0\0\0", 4)}) {
      test::write_text(dir.file("short"), content);
      QVERIFY_THROWS_EXCEPTION(Error, SafetensorsFile::open(dir.file("short")));
    }
  }

  void rejectsTruncationAtEveryByte() {
    const std::string whole = test::read_text(fx("small.safetensors"));
    QVERIFY(whole.size() > 100);
    SafetensorsFile::open(fx("small.safetensors"));  // the whole file is fine
    test::TempDir dir;
    for (size_t n = 0; n < whole.size(); ++n) {
      const std::string path = dir.file("cut" + std::to_string(n));
      test::write_text(path, whole.substr(0, n));
      try {
        SafetensorsFile::open(path);
        QFAIL(qPrintable(QString("truncated at %1 opened without error").arg(n)));
      } catch (const Error& e) {
        QCOMPARE(e.file(), path);
      }
      fs::remove(path);
    }
  }

  void byteFlipsFailCleanly() {
    // Every single-byte corruption either still describes a valid file or fails with ckptdoc::Error.
    const std::string whole = test::read_text(fx("small.safetensors"));
    test::TempDir dir;
    const std::string path = dir.file("flip");
    int rejected = 0;
    for (size_t i = 0; i < whole.size(); ++i) {
      for (const uint8_t mask : {uint8_t{0xff}, uint8_t{0x01}}) {
        std::string bad = whole;
        bad[i] = static_cast<char>(static_cast<uint8_t>(bad[i]) ^ mask);
        test::write_text(path, bad);
        try {
          const auto f = SafetensorsFile::open(path);
          uint64_t covered = 0;
          for (const auto& e : f.entries) covered += e.end - e.begin;
          QCOMPARE(8 + f.header_size + covered, static_cast<uint64_t>(bad.size()));
        } catch (const Error&) {
          ++rejected;
        }
      }
    }
    QVERIFY(rejected > 0);
  }
};

CKPTDOC_TEST_MAIN(TestSafetensors)
#include "test_safetensors.moc"
