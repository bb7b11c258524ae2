// The protocol-2 pickler: C++ round trips of real pickles, and CPython + torch 1.13's weights_only unpickler
// loading what it writes (values compared with the originals, opcodes checked against the weights_only set).
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickler.h"
#include "ckptdoc/format/unpickler.h"
#include "pickle_fixtures.h"
#include "test_support.h"
#include "value_json.h"

using namespace ckptdoc;
using namespace ckptdoc::test;

namespace {

void write_bytes(const std::string& path, std::span<const uint8_t> b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace

class TestPickler : public QObject {
  Q_OBJECT

  std::unique_ptr<TempDir> dir_;
  std::string plain_, torch_;

  QJsonObject check(const std::string& dir) {
    auto r = run_python(script("fixtures/check_pickles.py"), {dir});
    if (r.exit_code != 0) qWarning("%s", r.err.c_str());
    return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
  }

 private slots:
  void initTestCase() {
    dir_ = std::make_unique<TempDir>();
    const auto f = pickle_fixtures();
    QVERIFY2(f.error.empty(), f.error.c_str());
    plain_ = f.root + "/out/plain";
    torch_ = f.root + "/out/torch";
  }

  // Every real pickle, read and written back by ckptdoc, reads back equal in C++.
  void roundTripInCpp() {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(plain_)) {
      if (e.path().extension() != ".pkl") continue;
      const Value v = unpickle(read_bytes(e.path().string())).value;
      const auto bytes = pickle(v);
      UnpickleResult back;
      try {
        back = unpickle(bytes);
      } catch (const Error& err) {
        QFAIL(qPrintable(QString::fromStdString(e.path().string() + ": " + err.what())));
      }
      QVERIFY2(back.value.equals(v),
               qPrintable(QString::fromStdString(e.path().string() + "\n" + v.repr(400) + "\n" +
                                                 back.value.repr(400))));
      QCOMPARE(back.protocol, 2);
      ++n;
    }
    QVERIFY(n > 150);
  }

  // CPython and torch's weights_only unpickler load what ckptdoc writes, to the same values.
  void pythonLoadsOurPickles() {
    const QJsonObject expected = read_json(plain_ + "/expected.json");
    const std::string out = dir_->file("ours");
    std::filesystem::create_directories(out);
    std::map<std::string, QJsonObject> want;
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      const std::string file = it.key().toStdString();
      if (it.value().toObject()["protocol"].toInt() != 2 && it.value().toObject()["protocol"].toInt() != 4)
        continue;
      const Value v = unpickle(read_bytes(plain_ + "/" + file)).value;
      write_bytes(out + "/" + file, pickle(v));
      want[file] = it.value().toObject()["value"].toObject();
    }
    const QJsonObject got = check(out);
    QCOMPARE(static_cast<size_t>(got.size()), want.size());
    int wo_loaded = 0;
    for (const auto& [file, value] : want) {
      const QJsonObject r = got[QString::fromStdString(file)].toObject();
      QVERIFY2(r["bad_opcodes"].toArray().isEmpty(),
               qPrintable(QString::fromStdString(file) + ": " + compact(r)));
      QVERIFY2(!r.contains("error"), qPrintable(QString::fromStdString(file) + ": " + r["error"].toString()));
      QVERIFY2(json_match(r["value"].toObject(), value),
               qPrintable(QString::fromStdString(file) + "\n got: " + compact(r["value"].toObject()) +
                          "\nwant: " + compact(value)));
      if (r["wo_expected"].toBool()) {
        QVERIFY2(r.contains("wo_value"),
                 qPrintable(QString::fromStdString(file) + ": " + r["wo_error"].toString()));
        QVERIFY2(json_match(r["wo_value"].toObject(), value),
                 qPrintable(QString::fromStdString(file) + " (weights_only)"));
        ++wo_loaded;
      }
    }
    QVERIFY2(wo_loaded >= 20, qPrintable(QString::number(wo_loaded)));
  }

  // Tensors (views, parameters, a state_dict with _metadata) written by ckptdoc load in torch, weights_only
  // too.
  void tensorsLoadInTorch() {
    const std::string out = dir_->file("ours_torch");
    std::filesystem::create_directories(out);
    std::map<std::string, QJsonObject> want;
    for (const char* name : {"tensors", "state_dict", "protocol4"}) {
      const std::string d = torch_ + "/" + name;
      UnpickleOptions opt;
      opt.persistent_load = storage_loader(d);
      const Value v = unpickle(read_bytes(d + "/data.pkl"), opt).value;
      const std::string data_dir = out + "/" + name + ".data";
      std::filesystem::create_directories(data_dir);
      PickleOptions po;
      std::map<const Storage*, std::string> keys;
      po.storage_key = [&](const std::shared_ptr<Storage>& s) {
        auto it = keys.find(s.get());
        if (it != keys.end()) return it->second;
        const std::string key = std::to_string(keys.size());
        keys[s.get()] = key;
        VectorSink sink;
        s->write_to(sink);
        write_bytes(data_dir + "/" + key, sink.data);
        return key;
      };
      write_bytes(out + "/" + name + ".pkl", pickle(v, po));
      want[std::string(name) + ".pkl"] = read_json(d + "/expected.json");
    }
    const QJsonObject got = check(out);
    for (const auto& [file, value] : want) {
      const QJsonObject r = got[QString::fromStdString(file)].toObject();
      QVERIFY2(r["bad_opcodes"].toArray().isEmpty(),
               qPrintable(QString::fromStdString(file) + ": " + compact(r)));
      QVERIFY2(!r.contains("error"), qPrintable(QString::fromStdString(file) + ": " + r["error"].toString()));
      QVERIFY2(json_match(r["value"].toObject(), value),
               qPrintable(QString::fromStdString(file) + "\n got: " + compact(r["value"].toObject()) +
                          "\nwant: " + compact(value)));
      QVERIFY2(r.contains("wo_value"),
               qPrintable(QString::fromStdString(file) + ": " + r["wo_error"].toString()));
      QVERIFY2(json_match(r["wo_value"].toObject(), value),
               qPrintable(QString::fromStdString(file) + " (weights_only)"));
    }
  }

  void legacyPersistentIds() {
    Value root = Value::dict();
    root.set("w", Value::tensor(Tensor::from_bytes(DType::F16, {2}, {0, 0x3c, 0, 0xc0})));
    PickleOptions po;
    po.storage_key = [](const std::shared_ptr<Storage>&) { return std::string("94812345678912"); };
    po.legacy_persistent_ids = true;
    const auto bytes = pickle(root, po);
    UnpickleOptions uo;
    Value seen;
    uo.persistent_load = [&](const Value& pid) -> Value {
      seen = pid.clone();  // the unpickler frees its pid copy after the call
      return Value::storage(root.at("w").as_tensor().storage);
    };
    const Value back = unpickle(bytes, uo).value;
    QCOMPARE(seen.items().size(), size_t{6});
    QCOMPARE(seen.items()[2].as_str(), std::string("94812345678912"));
    QVERIFY(seen.items()[5].is_none());
    QCOMPARE(back.at("w").as_tensor().to_float(), (std::vector<float>{1.0f, -2.0f}));
  }

  void refusesWhatItCannotWrite() {
    Value t = Value::tensor(Tensor::from_bytes(DType::F32, {1}, {0, 0, 0, 0}));
    QVERIFY_THROWS_EXCEPTION(Error, pickle(t));  // no storage_key
    Value cyc = Value::list();
    Value tup = Value::tuple({cyc});
    cyc.items_mut().push_back(tup);
    QVERIFY_THROWS_EXCEPTION(Error, pickle(tup));
    cyc.dismantle();
    // A list holding itself is fine (memoized before its items), like CPython.
    Value self = Value::list();
    self.items_mut().push_back(self);
    const auto bytes = pickle(self);
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(bytes));  // and the reader refuses the cycle
    self.dismantle();
  }

  // A dotted name (read from a protocol 4 stream, where find_class walks it attribute by attribute) is
  // written as getattr calls on its first part, as CPython writes one below protocol 4: a protocol-2 GLOBAL
  // torch / os.path... would look the whole string up as one attribute and load as an AttributeError instead
  // (issue 24).
  void dottedNamesKeepWhatTheyReach() {
    auto x = [](const std::string& s) {
      return "X" + std::string(1, static_cast<char>(s.size())) + std::string(3, '\0') + s;
    };
    const std::string want = std::string("\x80\x02", 2) +
                             "cbuiltins\ngetattr\ncbuiltins\ngetattr\nctorch\nos\n" + x("path") + "\x86R" +
                             x("basename") + "\x86R.";
    const auto got = pickle(Value::global("torch", "os.path.basename"));
    QCOMPARE(std::string(got.begin(), got.end()), want);
    QVERIFY_THROWS_EXCEPTION(Error, pickle(Value::global("torch", "os..system")));
    // CPython reaches the same function (named, not called).
    const std::string file = dir_->file("dotted.pkl");
    write_bytes(file, got);
    const auto r =
        run(python(),
            {"-c", "import os, pickle, sys; print(pickle.load(open(sys.argv[1], 'rb')) is os.path.basename)",
             file});
    QVERIFY2(r.exit_code == 0, r.err.c_str());
    QCOMPARE(r.out, std::string("True\n"));
  }

  void exactBytesOfSmallValues() {
    // PROTO 2, EMPTY_DICT, BINPUT 0, BINUNICODE 'a', BININT1 1, SETITEMS-free single SETITEM, STOP
    Value d = Value::dict();
    d.set("a", Value::integer(1));
    const std::vector<uint8_t> want{0x80, 2, '}', 'q', 0, 'X', 1, 0, 0, 0, 'a', 'K', 1, 's', '.'};
    QCOMPARE(pickle(d), want);
    QCOMPARE(pickle(Value::integer(-1)), (std::vector<uint8_t>{0x80, 2, 'J', 0xff, 0xff, 0xff, 0xff, '.'}));
    QCOMPARE(pickle(Value::integer(int64_t{1} << 40)),
             (std::vector<uint8_t>{0x80, 2, 0x8a, 6, 0, 0, 0, 0, 0, 1, '.'}));
    QCOMPARE(pickle(Value::real(1.0)),
             (std::vector<uint8_t>{0x80, 2, 'G', 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, '.'}));
  }
};

CKPTDOC_TEST_MAIN(TestPickler)
#include "test_pickler.moc"
