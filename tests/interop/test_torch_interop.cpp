// Real torch writes what ckptdoc reads, and reads what ckptdoc writes: fixtures come from Debian's torch 1.13
// at test time, ckptdoc's rewrites are loaded back by torch.load(weights_only=True) and compared.
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "generated_fixture.h"
#include "test_support.h"

using namespace ckptdoc;
using nlohmann::json;

namespace {

std::string hex(const std::vector<uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s += d[x >> 4];
    s += d[x & 15];
  }
  return s;
}

// Compares an unpickled value with the description torch_files.py wrote; returns "" when equal.
std::string compare(const Value& v, const json& d, const std::string& where) {
  const std::string type = d["type"];
  auto fail = [&](const std::string& what) { return where + ": " + what; };
  if (type == "tensor") {
    if (!v.is_tensor()) return fail("expected a tensor, found " + v.type_name());
    const Tensor& t = v.as_tensor();
    if (dtype_name(t.dtype) != d["dtype"].get<std::string>())
      return fail("dtype " + std::string(dtype_name(t.dtype)));
    if (t.shape != d["shape"].get<std::vector<int64_t>>()) return fail("shape differs");
    if (t.strides != d["stride"].get<std::vector<int64_t>>()) return fail("strides differ");
    if (t.storage_offset != d["offset"].get<int64_t>()) return fail("storage offset differs");
    if (t.is_parameter != d["parameter"].get<bool>()) return fail("Parameter flag differs");
    if (hex(t.to_bytes()) != d["hex"].get<std::string>()) return fail("element bytes differ");
    return "";
  }
  if (type == "scalar") {
    const json& val = d["value"];
    if (val.is_null()) return v.is_none() ? "" : fail("expected None, found " + v.repr(40));
    if (val.is_boolean())
      return v.is(Value::Kind::Bool) && v.as_bool() == val.get<bool>() ? "" : fail("bool differs");
    if (val.is_number_integer())
      return v.is(Value::Kind::Int) && v.as_int() == val.get<int64_t>() ? ""
                                                                        : fail("int differs: " + v.repr(40));
    return v.is(Value::Kind::Float) && v.as_float() == val.get<double>()
               ? ""
               : fail("float differs: " + v.repr(40));
  }
  if (type == "bigint")
    return v.is(Value::Kind::BigInt) ? "" : fail("expected a big int, found " + v.type_name());
  if (type == "str")
    return v.is(Value::Kind::Str) && v.as_str() == d["value"].get<std::string>() ? "" : fail("str differs");
  if (type == "bytes") {
    if (!v.is(Value::Kind::Bytes)) return fail("expected bytes, found " + v.type_name());
    const auto& s = v.as_str();
    return hex(std::vector<uint8_t>(s.begin(), s.end())) == d["hex"].get<std::string>()
               ? ""
               : fail("bytes differ");
  }
  if (type == "size")
    return v.is(Value::Kind::Size) && v.as_size() == d["value"].get<std::vector<int64_t>>()
               ? ""
               : fail("size differs");
  if (type == "dtype")
    return v.is(Value::Kind::DType) && v.as_str() == d["value"].get<std::string>() ? ""
                                                                                   : fail("dtype differs");
  if (type == "dict" || type == "odict") {
    if (!v.is_dict()) return fail("expected a dict, found " + v.type_name());
    if (v.as_dict().ordered != (type == "odict")) return fail("OrderedDict-ness differs");
    const auto& items = v.as_dict().items;
    if (items.size() != d["items"].size()) return fail("item count differs");
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string k = items[i].first.repr(60);
      if (auto r = compare(items[i].first, d["items"][i][0], where + " key " + k); !r.empty()) return r;
      if (auto r = compare(items[i].second, d["items"][i][1], where + "[" + k + "]"); !r.empty()) return r;
    }
    return "";
  }
  if (type == "list" || type == "tuple") {
    if (!v.is(type == "list" ? Value::Kind::List : Value::Kind::Tuple))
      return fail("expected a " + type + ", found " + v.type_name());
    if (v.items().size() != d["items"].size()) return fail("length differs");
    for (size_t i = 0; i < v.items().size(); ++i)
      if (auto r = compare(v.items()[i], d["items"][i], where + "[" + std::to_string(i) + "]"); !r.empty())
        return r;
    return "";
  }
  if (type == "set")
    return v.is(Value::Kind::Set) && v.items().size() == d["items"].size() ? "" : fail("set differs");
  if (type == "object") {
    if (!v.is(Value::Kind::Object)) return fail("expected an inert object, found " + v.type_name());
    return v.as_object().qualified() == d["class"].get<std::string>()
               ? ""
               : fail("class " + v.as_object().qualified());
  }
  return fail("unknown description type " + type);
}

}  // namespace

class TestTorchInterop : public QObject {
  Q_OBJECT
  std::string fixtures_;  // torch_files.py make's files, generated once per build tree (read-only)
  std::unique_ptr<test::TempDir> out_;  // what this process writes
  json expected_;
  std::string fx(const std::string& name) const { return fixtures_ + "/" + name; }

 private slots:
  void initTestCase() {
    const auto f =
        test::generated_fixture("torch_files", {"fixtures/torch_files.py"}, [](const std::string& dir) {
          return test::run_python(test::script("fixtures/torch_files.py"), {"make", dir});
        });
    QVERIFY2(f.error.empty(), f.error.c_str());
    fixtures_ = f.dir;
    out_ = std::make_unique<test::TempDir>();
    expected_ = json::parse(test::read_text(fx("expected.json")));
    QVERIFY(expected_.size() >= 10);
  }

  void readsEveryTorchFixture() {
    for (const auto& [name, e] : expected_.items()) {
      TorchFile tf;
      try {
        tf = TorchFile::open(e["file"]);
      } catch (const std::exception& ex) {
        QFAIL(qPrintable(QString::fromStdString(name + ": " + ex.what())));
      }
      const std::string diff = compare(tf.root, e["desc"], name);
      QVERIFY2(diff.empty(), diff.c_str());
    }
  }

  void viewsShareOneStorage() {
    const TorchFile tf = TorchFile::open(fx("views_zip.pt"));
    const Value& root = tf.root;
    QCOMPARE(tf.storages.size(), size_t{2});
    QCOMPARE(root.at("a").as_tensor().storage.get(), root.at("slice").as_tensor().storage.get());
    QCOMPARE(root.at("p2").as_tensor().storage_offset, int64_t{12});
    QVERIFY(!root.at("matrix_t").as_tensor().is_contiguous());
  }

  void rewritesLoadInTorchWeightsOnly() {
    // Every rewrite is compared by one torch process (a torch start is seconds; it prints each pair's
    // result).
    std::vector<std::string> pairs{"compare"};
    for (const auto& [name, e] : expected_.items()) {
      if (!e["weights_only"].get<bool>()) continue;
      const TorchFile tf = TorchFile::open(e["file"]);
      for (auto format : {TorchFormat::Zip, TorchFormat::Legacy}) {
        const std::string out =
            out_->file(name + (format == TorchFormat::Zip ? ".ours-zip.pt" : ".ours-legacy.pt"));
        TorchWriteOptions opts;
        opts.format = format;
        write_torch_file(out, tf.root, opts);
        pairs.insert(pairs.end(), {e["file"].get<std::string>(), out});
      }
    }
    const size_t checked = (pairs.size() - 1) / 2;
    QVERIFY(checked >= 12);
    auto r = test::run_python(test::script("fixtures/torch_files.py"), pairs);
    QVERIFY2(r.exit_code == 0, (r.out + r.err).c_str());
    // Each pair reported equal, none skipped.
    size_t equal = 0;
    for (size_t at = r.out.find(": equal\n"); at != std::string::npos; at = r.out.find(": equal\n", at + 1))
      ++equal;
    QCOMPARE(equal, checked);
  }

  void rewriteKeepsInertObjects() {
    // Objects that weights_only refuses still round-trip through ckptdoc unchanged (re-read and compared).
    const TorchFile tf = TorchFile::open(fx("objects.pt"));
    const std::string out = out_->file("objects.ours.pt");
    write_torch_file(out, tf.root);
    const TorchFile again = TorchFile::open(out);
    QVERIFY(again.root.equals(tf.root));
    // torch_files.py defines UnknownThing in __main__ when it writes the file; alias it for unpickling.
    // (Loading without the alias always fails, so it is not tried first: one torch start instead of two.)
    const auto r = test::run(
        test::python(),
        {"-c",
         "import sys, __main__; sys.path.insert(0, '" + test::source_dir() +
             "/tests/fixtures');"
             "import torch_files as t; __main__.UnknownThing=t.UnknownThing; __main__.Color=t.Color; "
             "import torch;"
             "a=torch.load(sys.argv[1]); b=torch.load(sys.argv[2]);"
             "assert vars(a['args'])==vars(b['args']); assert (a['np_array']==b['np_array']).all();"
             "assert vars(a['unknown'])==vars(b['unknown']); assert a['enum']==b['enum']; print('ok')",
         fx("objects.pt"), out});
    CKPTDOC_EXPECT_EXIT(r, 0);
  }

  void truncatedFilesGiveErrorsNamingTheFile() {
    const std::string src = fx("dtypes_zip.pt");
    const std::string data = test::read_text(src);
    const std::string cut = out_->file("cut.pt");
    int errors = 0;
    for (size_t n = 0; n < data.size(); n += 7) {
      std::filesystem::remove(cut);  // a new file each time: ext4 flushes one rewritten in place on close
      test::write_text(cut, data.substr(0, n));
      try {
        TorchFile tf = TorchFile::open(cut);
        (void)tf;
      } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find(cut) != std::string::npos, e.what());
        ++errors;
      }
    }
    QCOMPARE(errors, static_cast<int>((data.size() + 6) / 7));
  }

  void legacyTruncationIsAnError() {
    const std::string data = test::read_text(fx("dtypes_legacy.pt"));
    const std::string cut = out_->file("cut_legacy.pt");
    for (size_t n = 0; n < data.size(); n += 3) {
      std::filesystem::remove(cut);  // a new file each time: ext4 flushes one rewritten in place on close
      test::write_text(cut, data.substr(0, n));
      QVERIFY_THROWS_EXCEPTION(Error, TorchFile::open(cut));
    }
  }

  // A legacy file's storages are mapped where they fall, most not on their element size: converting its
  // tensors (float32 to 16 bits is the backend's downcast, which takes floats) writes what its zip twin
  // gives. Under the sanitizer build a misaligned load fails the command.
  void legacyFilesExportLikeTheirZipTwins() {
    for (const std::string name : {"dtypes", "views", "plain"}) {
      for (const std::string dtype : {"float16", "bfloat16", "float32"}) {
        std::string out[2];
        for (int k = 0; k < 2; ++k) {
          const std::string file = name + (k ? "_legacy" : "_zip");
          out[k] = out_->file(file + "." + dtype + ".safetensors");
          CKPTDOC_EXPECT_EXIT(test::run_cli({"export", "--dtype", dtype, "-o", out[k], fx(file + ".pt")}), 0);
        }
        QVERIFY2(test::read_text(out[1]) == test::read_text(out[0]), (name + " " + dtype).c_str());
      }
    }
  }

  void storageShorterThanTensorIsRefused() {
    // A record one element short of what the pickle claims (the CVE-2026-24747 pattern).
    auto r = test::run(test::python(),
                       {"-c",
                        "import torch, zipfile, sys; torch.save({'w': torch.ones(8)}, sys.argv[1]);"
                        "zin = zipfile.ZipFile(sys.argv[1]); zout = zipfile.ZipFile(sys.argv[2], 'w');"
                        "[zout.writestr(i, zin.read(i)[:-4] if i.endswith('data/0') else zin.read(i)) for i "
                        "in zin.namelist()]; zout.close()",
                        out_->file("ok.pt"), out_->file("short.pt")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    try {
      TorchFile::open(out_->file("short.pt"));
      QFAIL("a short storage record was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("data/0") != std::string::npos, e.what());
      QVERIFY2(std::string(e.what()).find("28 bytes") != std::string::npos, e.what());
    }
  }

  void cliLsPrintsTheTree() {
    auto r = test::run_cli({"ls", fx("module_state.pt")});
    CKPTDOC_EXPECT_EXIT(r, 0);
    QVERIFY(r.out.find("0.weight: Tensor float32 [3, 4]") != std::string::npos);
    QVERIFY(r.out.find("2.running_mean") != std::string::npos);
    QVERIFY(r.out.find("OrderedDict") != std::string::npos);
    auto j = test::run_cli({"ls", "--json", fx("objects.pt")});
    CKPTDOC_EXPECT_EXIT(j, 0);
    const json parsed = json::parse(j.out);
    QCOMPARE(parsed["format"].get<std::string>(), std::string("torch-zip"));
    QVERIFY(j.out.find("argparse.Namespace") != std::string::npos);
  }

  void cliLsRefusesGarbageWithExitCode2() {
    test::write_text(out_->file("garbage.pt"), "this is not a checkpoint at all");
    auto r = test::run_cli({"ls", out_->file("garbage.pt")});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY(r.err.find("garbage.pt") != std::string::npos);
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestTorchInterop)
#include "test_torch_interop.moc"
