// The inert unpickler against real pickles written by CPython (protocols 0-5), torch.save'd data.pkl streams,
// and hostile streams that must stay inert or be refused.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <memory>

#include "ckptdoc/error.h"
#include "ckptdoc/format/known_objects.h"
#include "ckptdoc/format/unpickler.h"
#include "pickle_fixtures.h"
#include "test_support.h"
#include "value_json.h"

using namespace ckptdoc;
using namespace ckptdoc::test;

namespace {

// Protocol-2 pickle bytes written by hand, for streams torch would not write (or not on this machine).
struct PickleBytes {
  std::vector<uint8_t> p{0x80, 2};
  void global(const std::string& m, const std::string& n) {
    p.push_back('c');
    p.insert(p.end(), m.begin(), m.end());
    p.push_back('\n');
    p.insert(p.end(), n.begin(), n.end());
    p.push_back('\n');
  }
  void ustr(const std::string& s) {
    p.push_back('X');
    for (int i = 0; i < 4; ++i) p.push_back(static_cast<uint8_t>(s.size() >> (8 * i)));
    p.insert(p.end(), s.begin(), s.end());
  }
};

}  // namespace

class TestUnpickler : public QObject {
  Q_OBJECT

  std::string plain_, torch_, hostile_, marker_;

 private slots:
  void initTestCase() {
    const auto f = pickle_fixtures();
    QVERIFY2(f.error.empty(), f.error.c_str());
    plain_ = f.root + "/out/plain";
    torch_ = f.root + "/out/torch";
    hostile_ = f.root + "/hostile";
    marker_ = f.marker;
  }

  void plainValuesAllProtocols() {
    const QJsonObject expected = read_json(plain_ + "/expected.json");
    QVERIFY(expected.size() >= 150);
    int checked = 0;
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      const std::string file = it.key().toStdString();
      const QJsonObject e = it.value().toObject();
      UnpickleResult r;
      UnpickleOptions opt;
      opt.file_name = file;
      try {
        r = unpickle(read_bytes(plain_ + "/" + file), opt);
      } catch (const Error& err) {
        QFAIL(qPrintable(QString::fromStdString(file + ": " + err.what())));
      }
      const QJsonObject got = to_json(r.value);
      QVERIFY2(json_match(got, e["value"].toObject()),
               qPrintable(QString::fromStdString(file) + "\n got: " + compact(got) +
                          "\nwant: " + compact(e["value"].toObject())));
      const int proto = e["protocol"].toInt();
      QCOMPARE(r.protocol, proto >= 2 ? proto : 0);
      QCOMPARE(r.end_offset, static_cast<uint64_t>(read_bytes(plain_ + "/" + file).size()));
      ++checked;
    }
    QCOMPARE(checked, expected.size());
  }

  void knownObjectHelpers() {
    auto load = [&](const std::string& f) { return unpickle(read_bytes(plain_ + "/" + f)).value; };
    for (int p = 0; p <= 5; ++p) {
      const std::string s = "_p" + std::to_string(p) + ".pkl";
      const Value zs = load("zero_stage" + s);
      QCOMPARE(zs.as_int(), int64_t{2});
      QCOMPARE(zero_stage_value(zs).value_or(-1), int64_t{2});
      const Value fa = load("fragment" + s);
      QVERIFY(fa.type_name() == "deepspeed.utils.tensor_fragment.fragment_address" || p < 2);
      auto addr = fragment_address_of(fa);
      if (p >= 2) {  // protocols 0-1 wrap plain instances in copyreg._reconstructor
        QVERIFY(addr.has_value());
        QCOMPARE(addr->first, int64_t{1024});
        QCOMPARE(addr->second, int64_t{4096});
        const Value ls = load("loss_scaler" + s);
        QVERIFY(is_loss_scaler(ls));
        QCOMPARE(loss_scaler_state(ls)->at("cur_scale").as_float(), 65536.0);
        QCOMPARE(ls.attr("cur_iter")->as_int(), int64_t{12});
        const Value ns = load("namespace" + s);
        QCOMPARE(ns.type_name(), std::string("argparse.Namespace"));
        QCOMPARE(namespace_attrs(ns)->at("name").as_str(), std::string("run"));
      }
      const Value en = load("enum" + s);  // IntEnum: getattr(Color, 'BLUE') in Python 3.11+, else Color(7)
      QVERIFY(en.is(Value::Kind::Object));
      auto arr = numpy_array_of(load("numpy_array" + s));
      QVERIFY(arr.has_value());
      QCOMPARE(arr->dtype, std::string("<f4"));
      QCOMPARE(arr->shape, (std::vector<int64_t>{3, 4}));
      QCOMPARE(arr->data.size(), size_t{48});
      QCOMPARE(numpy_scalar_as_double(load("numpy_scalar_f64" + s)).value_or(0), 2.5);
      QCOMPARE(numpy_scalar_as_double(load("numpy_scalar_i32" + s)).value_or(0), -7.0);
      const Value od = load("ordered_state" + s);
      QCOMPARE(od.type_name(), std::string("OrderedDict"));
      QVERIFY(od.attr("_metadata") && od.attr("_metadata")->is_dict());
      const Value misc = load("torch_misc" + s);
      QCOMPARE(misc.at("size").type_name(), std::string("torch.Size"));
      QCOMPARE(misc.at("dtype").as_str(), std::string("float16"));
      QCOMPARE(misc.at("device").as_str(), std::string("cuda:1"));
    }
  }

  void globalsAreCollected() {
    auto r = unpickle(read_bytes(plain_ + "/ordered_state_p2.pkl"));
    QCOMPARE(r.globals, std::vector<std::string>{"collections.OrderedDict"});
    r = unpickle(read_bytes(plain_ + "/set_p2.pkl"));
    QCOMPARE(r.globals, std::vector<std::string>{"__builtin__.set"});
    r = unpickle(read_bytes(plain_ + "/set_p4.pkl"));
    QVERIFY(r.globals.empty());
  }

  void torchSavedTensors() {
    for (const char* name : {"tensors", "state_dict", "protocol4"}) {
      const std::string d = torch_ + "/" + name;
      UnpickleOptions opt;
      opt.persistent_load = storage_loader(d);
      opt.record_name = "archive/data.pkl";
      UnpickleResult r;
      try {
        r = unpickle(read_bytes(d + "/data.pkl"), opt);
      } catch (const Error& e) {
        QFAIL(e.what());
      }
      const QJsonObject want = read_json(d + "/expected.json");
      const QJsonObject got = to_json(r.value);
      QVERIFY2(json_match(got, want),
               qPrintable(QString(name) + "\n got: " + compact(got) + "\nwant: " + compact(want)));
    }
    // Views keep their strides and share storages.
    const std::string d = torch_ + "/tensors";
    UnpickleOptions opt;
    opt.persistent_load = storage_loader(d);
    const Value v = unpickle(read_bytes(d + "/data.pkl"), opt).value;
    const auto& t = v.at("transposed").as_tensor();
    QCOMPARE(t.strides, (std::vector<int64_t>{1, 6}));
    QVERIFY(!t.is_contiguous());
    QCOMPARE(t.storage.get(), v.at("f32").as_tensor().storage.get());
    QCOMPARE(v.at("slice").as_tensor().storage_offset, int64_t{8});
    QVERIFY(v.at("param").as_tensor().is_parameter);
    QVERIFY(v.at("param").as_tensor().requires_grad);
    QVERIFY(!v.at("nograd_param").as_tensor().requires_grad);
    QCOMPARE(v.at("f32").as_tensor().contiguous_bytes().size(), size_t{96});
  }

  void tensorViewValidation() {
    // A hand-written _rebuild_tensor_v2 whose view runs past the storage must be refused.
    auto make = [](int64_t numel, std::vector<uint8_t> view) {
      PickleBytes b;
      auto& p = b.p;
      auto global = [&](const std::string& m, const std::string& n) { b.global(m, n); };
      auto ustr = [&](const std::string& s) { b.ustr(s); };
      global("torch._utils", "_rebuild_tensor_v2");
      p.push_back('(');
      p.push_back('(');
      ustr("storage");
      global("torch", "FloatStorage");
      ustr("0");
      ustr("cpu");
      p.push_back('K');
      p.push_back(static_cast<uint8_t>(numel));
      p.push_back('t');
      p.push_back('Q');
      p.insert(p.end(), view.begin(), view.end());  // offset, size, stride
      p.push_back(0x89);
      global("collections", "OrderedDict");
      p.push_back(')');
      p.push_back('R');
      p.push_back('t');
      p.push_back('R');
      p.push_back('.');
      return p;
    };
    UnpickleOptions opt;
    opt.persistent_load = [](const Value& pid) {
      auto s = Storage::from_bytes(DType::F32,
                                   std::vector<uint8_t>(static_cast<size_t>(pid.items()[4].as_int()) * 4));
      return Value::storage(s);
    };
    // offset 0, size (2,3), stride (3,1) on 6 elements: fine.
    const std::vector<uint8_t> ok{'K', 0, 'K', 2, 'K', 3, 0x86, 'K', 3, 'K', 1, 0x86};
    QCOMPARE(unpickle(make(6, ok), opt).value.as_tensor().numel(), int64_t{6});
    // Same view on 5 elements, negative stride, size/stride length mismatch, negative offset.
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(make(5, ok), opt));
    QVERIFY_THROWS_EXCEPTION(
        Error,
        unpickle(make(6, {'K', 0, 'K', 2, 'K', 3, 0x86, 'J', 0xff, 0xff, 0xff, 0xff, 'K', 1, 0x86}), opt));
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(make(6, {'K', 0, 'K', 2, 'K', 3, 0x86, 'K', 1, 0x85}), opt));
    QVERIFY_THROWS_EXCEPTION(
        Error, unpickle(make(6, {'J', 0xff, 0xff, 0xff, 0xff, 'K', 2, 0x85, 'K', 1, 0x85}), opt));
    // Overflowing extent: stride 2^62 with size 8.
    QVERIFY_THROWS_EXCEPTION(
        Error, unpickle(make(6, {'K', 0, 'K', 8, 0x85, 0x8a, 8, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x85}), opt));
    // Empty tensors need no elements.
    QCOMPARE(unpickle(make(0, {'K', 5, 'K', 0, 'K', 3, 0x86, 'K', 3, 'K', 1, 0x86}), opt)
                 .value.as_tensor()
                 .numel(),
             int64_t{0});
    // Without persistent_load, storages are refused.
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(make(6, ok)));
  }

  // torch 2 pickles a tensor that carries Python attributes as _rebuild_from_type_v2(func, type, args,
  // state): DeepSpeed 0.19's ZeRO-3 fp32_flat_groups (attribute ds_id). A plain Tensor or Parameter reads as
  // the tensor func(*args) (attributes dropped); a subclass stays an inert object.
  void tensorWithAttributes() {
    auto make = [](const std::string& type_module, const std::string& type_name) {
      PickleBytes b;
      auto& p = b.p;
      auto global = [&](const std::string& m, const std::string& n) { b.global(m, n); };
      auto ustr = [&](const std::string& s) { b.ustr(s); };
      global("torch._tensor", "_rebuild_from_type_v2");
      p.push_back('(');
      global("torch._utils", "_rebuild_tensor_v2");
      global(type_module, type_name);
      p.push_back('(');
      p.push_back('(');
      ustr("storage");
      global("torch", "FloatStorage");
      ustr("6");
      ustr("cpu");
      p.insert(p.end(), {'K', 5, 't', 'Q'});
      p.insert(p.end(),
               {'K', 0, 'K', 5, 0x85, 'K', 1, 0x85, 0x88});  // offset 0, size (5,), stride (1,), grad
      global("collections", "OrderedDict");
      p.insert(p.end(), {')', 'R', 't', '}'});
      ustr("ds_id");
      ustr("0_6");
      p.insert(p.end(), {'s', 't', 'R', '.'});
      return p;
    };
    UnpickleOptions opt;
    opt.persistent_load = [](const Value& pid) {
      return Value::storage(Storage::from_bytes(
          DType::F32, std::vector<uint8_t>(static_cast<size_t>(pid.items()[4].as_int()) * 4)));
    };
    const Value plain = unpickle(make("torch", "Tensor"), opt).value;
    QVERIFY(plain.is_tensor());
    QCOMPARE(plain.as_tensor().numel(), int64_t{5});
    QVERIFY(plain.as_tensor().requires_grad);
    QVERIFY(!plain.as_tensor().is_parameter);
    const Value param = unpickle(make("torch.nn.parameter", "Parameter"), opt).value;
    QVERIFY(param.is_tensor() && param.as_tensor().is_parameter);
    QVERIFY(!unpickle(make("some.module", "MyTensor"), opt).value.is_tensor());
  }

  // A persistent id is copied for the callback: a 100,000-deep or cyclic one is refused with a message, not a
  // stack overflow in the copy (found by fuzz_unpickler under ASan).
  void deepOrCyclicPersistentIdIsRefused() {
    UnpickleOptions opt;
    int calls = 0;
    opt.persistent_load = [&](const Value&) {
      ++calls;
      return Value::storage(Storage::from_bytes(DType::F32, std::vector<uint8_t>(4)));
    };
    std::vector<uint8_t> deep{0x80, 2};
    for (int i = 0; i < 100000; ++i) deep.push_back(']');
    for (int i = 1; i < 100000; ++i) deep.push_back('a');
    deep.insert(deep.end(), {'Q', '.'});
    try {
      (void)unpickle(deep, opt);
      QFAIL("a 100000-deep persistent id was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("persistent id is nested deeper") != std::string::npos, e.what());
    }
    const std::vector<uint8_t> cyclic{0x80, 2, ']', 'q', 0, 'h', 0, 'a', 'Q', '.'};
    try {
      (void)unpickle(cyclic, opt);
      QFAIL("a cyclic persistent id was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("persistent id contains a cycle") != std::string::npos, e.what());
    }
    QCOMPARE(calls, 0);
    // A shallow one still reaches the callback.
    const std::vector<uint8_t> shallow{0x80, 2, ']', 'K', 7, 'a', 'Q', '.'};
    QVERIFY(unpickle(shallow, opt).value.is(Value::Kind::Storage));
    QCOMPARE(calls, 1);
  }

  void hostileStreams() {
    const QJsonObject table = read_json(hostile_ + "/hostile.json");
    QVERIFY(table.size() >= 50);
    int inert = 0, refused = 0;
    for (auto it = table.begin(); it != table.end(); ++it) {
      const std::string file = it.key().toStdString();
      const QString expect = it.value().toObject()["expect"].toString();
      const auto data = read_bytes(hostile_ + "/" + file);
      UnpickleOptions opt;
      opt.file_name = file;
      if (expect == "error") {
        try {
          auto r = unpickle(data, opt);
          QFAIL(qPrintable(QString::fromStdString(file + " was accepted: " + r.value.repr())));
        } catch (const Error& e) {
          QVERIFY2(std::string(e.what()).find(file) != std::string::npos, e.what());
          QVERIFY2(e.where().find("offset") != std::string::npos, e.what());
          ++refused;
        }
      } else {
        try {
          auto r = unpickle(data, opt);
          for (const auto& g : it.value().toObject()["globals"].toArray()) {
            const std::string name = g.toString().toStdString();
            QVERIFY2(std::find(r.globals.begin(), r.globals.end(), name) != r.globals.end(),
                     qPrintable(QString::fromStdString(file + ": global " + name + " not reported")));
          }
          (void)r.value.repr(10000);
          ++inert;
        } catch (const Error& e) {
          QFAIL(qPrintable(QString::fromStdString(file + " should be inert: " + e.what())));
        }
      }
    }
    // That these payloads really run code (in Python) and are flagged is test_pickle_safety's part.
    qInfo("hostile pickles: %d tried, %d inert, %d refused", static_cast<int>(table.size()), inert, refused);
  }

  void hostileObjectsAreDescribed() {
    auto v = unpickle(read_bytes(hostile_ + "/os_system.pkl")).value;
    QVERIFY(v.is_object("os", "system"));
    QCOMPARE(v.as_object().args->items()[0].as_str(), "touch " + marker_);
    v = unpickle(read_bytes(hostile_ + "/import_chain.pkl")).value;
    QCOMPARE(v.as_object().name, std::string("<call>"));
    QVERIFY(v.as_object().callable->is_object("builtins", "getattr"));
    v = unpickle(read_bytes(hostile_ + "/build_setstate.pkl")).value;
    QVERIFY(v.is_object("os", "system"));
    QVERIFY(v.attr("__setstate__")->is(Value::Kind::Global));
    v = unpickle(read_bytes(hostile_ + "/billion_laughs.pkl")).value;
    QCOMPARE(v.items().size(), size_t{10});
    QVERIFY(v.repr(500).size() <= 500);
  }

  void errorMessagesNameOffsetAndOpcode() {
    UnpickleOptions opt;
    opt.file_name = "model.pt";
    opt.record_name = "archive/data.pkl";
    const std::vector<uint8_t> data{0x80, 2, 'h', 5, '.'};
    try {
      unpickle(data, opt);
      QFAIL("accepted");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::Corrupt);
      QCOMPARE(e.file(), std::string("model.pt"));
      QCOMPARE(e.where(), std::string("record 'archive/data.pkl', offset 2 (opcode BINGET)"));
      QVERIFY2(e.detail().find("memo index 5") != std::string::npos, e.what());
    }
  }

  // Memo indices are whatever the stream says: picklers count up from 0, but a stream may store far apart,
  // overwrite, and store None; a gap below a stored index was never stored.
  void memoIndicesAnywhere() {
    auto le4 = [](uint32_t v) {
      return std::vector<uint8_t>{static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8),
                                  static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 24)};
    };
    auto put = [&](uint32_t i) {
      auto b = le4(i);
      b.insert(b.begin(), 'r');  // LONG_BINPUT
      return b;
    };
    auto get = [&](uint32_t i) {
      auto b = le4(i);
      b.insert(b.begin(), 'j');  // LONG_BINGET
      return b;
    };
    std::vector<uint8_t> data{0x80, 2, '('};
    auto add = [&](const std::vector<uint8_t>& b) { data.insert(data.end(), b.begin(), b.end()); };
    add({'N'});  // None, stored far away
    add(put(4000000000u));
    add({'K', 7});
    add(put(0));
    add({'K', 8});
    add(put(0));  // overwrites entry 0
    add(get(4000000000u));
    add(get(0));
    add({'K', 9});
    add(put(1000));  // near the count: a gap below it
    add({'K', 10});
    add(put(3000));  // far from it
    add(get(1000));
    add(get(3000));
    add({'t', '.'});
    const Value v = unpickle(data).value;
    QVERIFY(v.is(Value::Kind::Tuple));
    QCOMPARE(v.repr(), std::string("(None, 7, 8, None, 8, 9, 10, 9, 10)"));

    std::vector<uint8_t> gap{0x80, 2, 'K', 1};
    for (auto b : {put(1000), get(500)}) gap.insert(gap.end(), b.begin(), b.end());
    gap.push_back('.');
    try {
      unpickle(gap);
      QFAIL("a memo index below a stored one was read as stored");
    } catch (const Error& e) {
      QVERIFY2(e.detail().find("memo index 500 was never stored") != std::string::npos, e.what());
    }
  }

  void limitsAreEnforced() {
    auto data = read_bytes(plain_ + "/big_list_p2.pkl");
    UnpickleOptions opt;
    opt.limits.max_container_items = 1000;
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(data, opt));
    opt = {};
    opt.limits.max_alloc_bytes = 100;
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(read_bytes(plain_ + "/strings_p2.pkl"), opt));
    opt = {};
    opt.limits.max_memo = 10;
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(read_bytes(plain_ + "/big_dict_p2.pkl"), opt));
    opt = {};
    opt.limits.max_depth = 3;
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(read_bytes(plain_ + "/nested_p2.pkl"), opt));
    opt.limits.max_depth = 6;
    QVERIFY(unpickle(read_bytes(plain_ + "/nested_p2.pkl"), opt).value.is_dict());
    opt = {};
    opt.limits.max_stack = 5;
    QVERIFY_THROWS_EXCEPTION(Error, unpickle(read_bytes(plain_ + "/small_ints_p2.pkl"), opt));
  }

  void everyTruncationIsAnError() {
    size_t files = 0, prefixes = 0;
    for (const auto& dir : {plain_, hostile_}) {
      for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".pkl") continue;
        const auto data = read_bytes(entry.path().string());
        if (data.size() > 4096) continue;
        size_t end = data.size();
        try {
          end = static_cast<size_t>(unpickle(data).end_offset);
        } catch (const Error&) {
        }
        ++files;
        for (size_t n = 0; n < end; ++n) {
          ++prefixes;
          try {
            unpickle(std::span<const uint8_t>(data.data(), n));
            QFAIL(qPrintable(QString("prefix %1 of %2 accepted")
                                 .arg(n)
                                 .arg(QString::fromStdString(entry.path().string()))));
          } catch (const Error&) {
          }
        }
      }
    }
    QVERIFY(files > 150);
    qInfo("%zu files, %zu prefixes", files, prefixes);
  }

  // --- Value itself ---

  void accessorsNameExpectedAndFound() {
    try {
      Value::str("x").as_int();
      QFAIL("no throw");
    } catch (const Error& e) {
      QCOMPARE(e.detail(), std::string("expected int, found str"));
    }
    QVERIFY_THROWS_EXCEPTION(Error, Value::integer(1).items());
    QVERIFY_THROWS_EXCEPTION(Error, Value::list().as_dict());
    QVERIFY_THROWS_EXCEPTION(Error, Value::dict().at("missing"));
    QCOMPARE(Value::boolean(true).as_int(), int64_t{1});
    QCOMPARE(Value::integer(3).as_float(), 3.0);
    QCOMPARE(Value::dict(true).type_name(), std::string("OrderedDict"));
    QCOMPARE(Value::size({1}).type_name(), std::string("torch.Size"));
    QCOMPARE(Value::dtype("torch.bfloat16").as_str(), std::string("bfloat16"));
    QCOMPARE(Value::big_integer({1, 0}).kind(), Value::Kind::Int);
  }

  void dictLookupWithThousandsOfKeys() {
    Value d = Value::dict();
    for (int i = 0; i < 5000; ++i) d.set("key" + std::to_string(i), Value::integer(i));
    QCOMPARE(d.as_dict().items.size(), size_t{5000});
    for (int i = 0; i < 5000; i += 7) QCOMPARE(d.at("key" + std::to_string(i)).as_int(), int64_t{i});
    d.set("key10", Value::integer(-1));  // replaces in place
    QCOMPARE(d.as_dict().items.size(), size_t{5000});
    QCOMPARE(d.at("key10").as_int(), int64_t{-1});
    QVERIFY(d.erase("key0"));
    QVERIFY(d.get("key0") == nullptr);
    QCOMPARE(d.at("key4999").as_int(), int64_t{4999});
    // Mutation through dict_mut() invalidates the index.
    d.dict_mut().items[0].first = Value::str("renamed");
    QCOMPARE(d.at("renamed").as_int(), int64_t{1});
    QVERIFY(d.get("key1") == nullptr);
    // Repeated keys (a dict filled through dict_mut()) and int keys among them: the index finds the first
    // item of a key, as the linear search does, and appends after it keep it current.
    Value r = Value::dict();
    for (int i = 0; i < 200; ++i)
      r.dict_mut().items.emplace_back(
          i % 5 == 0 ? Value::integer(i) : Value::str("k" + std::to_string(i % 40)), Value::integer(i));
    QCOMPARE(r.at("k1").as_int(), int64_t{1});
    QCOMPARE(r.at("k39").as_int(), int64_t{39});
    QVERIFY(r.get("k0") == nullptr);  // every i % 40 == 0 is also i % 5 == 0: int keys only
    r.set("k1", Value::integer(-1));  // replaces the first k1, appends nothing
    QCOMPARE(r.as_dict().items.size(), size_t{200});
    QCOMPARE(r.as_dict().items[1].second.as_int(), int64_t{-1});
    QCOMPARE(r.as_dict().items[41].second.as_int(), int64_t{41});
    for (int i = 0; i < 3000; ++i) r.set("new" + std::to_string(i), Value::integer(i));
    QCOMPARE(r.at("new0").as_int(), int64_t{0});
    QCOMPARE(r.at("new2999").as_int(), int64_t{2999});
    QCOMPARE(r.at("k2").as_int(), int64_t{2});
    QVERIFY(r.get("new3000") == nullptr);
  }

  void reprCloneEquals() {
    Value d = Value::dict(true);
    d.set("a", Value::list({Value::integer(1), Value::real(0.5), Value::str("x'y"), Value::bytes("\x01")}));
    d.set("t", Value::tuple({Value::none()}));
    QCOMPARE(d.repr(), std::string("OrderedDict({'a': [1, 0.5, 'x\\'y', b'\\x01'], 't': (None,)})"));
    QVERIFY(d.repr(10).size() <= 10);
    Value c = d.clone();
    QVERIFY(c.equals(d));
    c.get_mut("a")->items_mut().push_back(Value::none());
    QVERIFY(!c.equals(d));
    QCOMPARE(d.at("a").items().size(), size_t{4});
    // Cycles do not hang equals or repr, and dismantle frees them.
    Value l = Value::list();
    l.items_mut().push_back(l);
    QVERIFY(l.equals(l));
    QVERIFY(l.repr(50).size() <= 50);
    l.dismantle();
    QVERIFY(l.is_none());
  }

  void dismantleDeepTree() {
    Value root = Value::list();
    Value cur = root;
    for (int i = 0; i < 1000000; ++i) {
      Value next = Value::list();
      cur.items_mut().push_back(next);
      cur = next;
    }
    cur = Value();
    root.dismantle();  // a recursive destructor would overflow the stack here
    QVERIFY(root.is_none());
  }

  void tensorCopiesAnyStrides() {
    std::vector<uint8_t> bytes(24 * 4);
    for (int i = 0; i < 24; ++i) {
      float f = static_cast<float>(i);
      std::memcpy(bytes.data() + i * 4, &f, 4);
    }
    Tensor base = Tensor::from_bytes(DType::F32, {4, 6}, bytes);
    QVERIFY(base.is_contiguous());
    Tensor t = base;
    t.shape = {6, 4};
    t.strides = {1, 6};  // transpose
    QVERIFY(!t.is_contiguous());
    auto f = t.to_float();
    QCOMPARE(f[0], 0.0f);
    QCOMPARE(f[1], 6.0f);
    QCOMPARE(f[4], 1.0f);
    QVERIFY_THROWS_EXCEPTION(Error, t.contiguous_bytes());
    Tensor s = base;
    s.shape = {2, 2};
    s.strides = {6, 2};
    s.storage_offset = 7;
    QCOMPARE(s.to_float(), (std::vector<float>{7, 9, 13, 15}));
    s.storage_offset = 20;  // runs past the storage
    QVERIFY_THROWS_EXCEPTION(Error, s.to_bytes());
    Tensor p = Tensor::produced(DType::F16, {2}, [](ByteSink& sink) {
      const uint16_t h[2] = {float_to_half(1.5f), float_to_half(-2.0f)};
      sink.write({reinterpret_cast<const uint8_t*>(h), 4});
    });
    QCOMPARE(p.to_float(), (std::vector<float>{1.5f, -2.0f}));
    QVERIFY_THROWS_EXCEPTION(Error, p.contiguous_bytes());
    QCOMPARE(Tensor::contiguous_strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  }
};

CKPTDOC_TEST_MAIN(TestUnpickler)
#include "test_unpickler.moc"
