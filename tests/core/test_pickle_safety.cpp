// Pickle safety (pickle_safety.h): every hostile pickle that really runs code under Python's pickle.loads
// (the fixture generator proves it in a child process) is reported as an unsafe-pickle error naming its
// callable, inside a torch.save zip as a checkpoint would carry it; files DeepSpeed really wrote carry no
// hazard at all.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/pickle_use_memo.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/format/zip_writer.h"
#include "ckptdoc/io/mapped_file.h"
#include "page_cache.h"
#include "pickle_fixtures.h"
#include "test_support.h"

using namespace ckptdoc;
using namespace ckptdoc::test;

namespace {

// A torch.save-shaped zip whose data.pkl is `pickle` (how a hostile pickle rides in a checkpoint file).
void wrap_as_torch_file(const std::vector<uint8_t>& pickle, const std::string& path,
                        const std::string& archive = "archive") {
  VectorSink sink;
  ZipWriter zip(sink);
  zip.add(archive + "/data.pkl", pickle);
  const std::string version = "3\n";
  zip.add(archive + "/version", std::span(reinterpret_cast<const uint8_t*>(version.data()), version.size()));
  zip.finish();
  write_text(path, std::string(sink.data.begin(), sink.data.end()));
}

// Every field of every use, one line each.
std::string describe(const std::vector<PickleUse>& uses) {
  std::string s;
  for (const auto& u : uses)
    s += u.record + " | " + u.callable + " | " + u.module + " | " + u.name + " | " +
         std::to_string(static_cast<int>(u.how)) + " | " + u.via + " | " + u.nested_in + " | " +
         u.attribute_of + " | " + u.attribute + " | " + std::to_string(u.offset) + " | " +
         std::to_string(u.count) + " | " + (u.computed ? "computed" : "global") + "\n";
  return s;
}

std::string listing(const std::vector<PickleHazard>& hs) {
  std::string s;
  for (const auto& h : hs) s += "\n  " + h.severity + " " + h.message();
  return s.empty() ? " (none)" : s;
}

bool has_error_for(const std::vector<PickleHazard>& hs, const std::string& callable,
                   const std::string& how_part = "") {
  return std::any_of(hs.begin(), hs.end(), [&](const PickleHazard& h) {
    return h.severity == "error" && h.callable == callable && h.how.find(how_part) != std::string::npos;
  });
}

// Pickle opcodes for hand-built payloads.
std::string binunicode(const std::string& s) {  // X: 4-byte length
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((s.size() >> (8 * i)) & 0xff);
  return out + s;
}
std::string short_binunicode(const std::string& s) {
  return "\x8c" + std::string(1, static_cast<char>(s.size())) + s;
}
std::string global(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}
std::string stack_global(const std::string& module, const std::string& name) {
  return short_binunicode(module) + short_binunicode(name) + "\x93";
}
std::string call1(const std::string& callable, const std::string& arg) {  // callable(arg): TUPLE1, REDUCE
  return callable + binunicode(arg) + "\x85R";
}
std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

// The payloads of issue 24: names that read as torch but reach os.system or torch.fx's exec. Built here, byte
// by byte; the command is an echo, and nothing here loads them.
std::string torch_os_system() {
  return call1(global("torch", "os.system"), "echo pwned");
}
std::string serialization_os_system() {
  return call1(stack_global("torch.serialization", "os.system"), "echo pwned");
}
std::string fx_exec_with_source() {
  return global("torch.fx.graph_module", "_exec_with_source") + "(" + binunicode("print('pwned')") + "}tR";
}

// A copy of the committed zero2_fp16_ws2 checkpoint (real DeepSpeed files) whose tag-folder file `file`
// carries `payload` as the value of a new top-level key "evil": spliced into the real data.pkl after its
// EMPTY_DICT, between PROTO 4 and PROTO 2 (the rest keeps the Python 2 names protocol 2 maps), as a crafted
// file would carry it. torch 1.13's torch.load(weights_only=False) of such a file runs the payload (checked
// by hand, not here).
std::string checkpoint_carrying(const TempDir& dir, const std::string& file, const std::string& payload) {
  const std::string ckpt = dir.file("ckpt");
  copy_tree(deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint", ckpt);
  const std::string path = ckpt + "/global_step5/" + file;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> records;
  {
    ZipReader zip(MappedFile::open(path));
    for (const auto& e : zip.entries()) {
      const auto d = zip.data(e);
      records.push_back({e.name, {d.begin(), d.end()}});
    }
  }
  VectorSink sink;
  ZipWriter zip(sink);
  bool spliced = false;
  for (auto& [name, data] : records) {
    if (name.size() > 9 && name.compare(name.size() - 9, 9, "/data.pkl") == 0) {
      const std::string head("\x80\x02}q\x00", 5);  // PROTO 2, EMPTY_DICT, BINPUT 0
      if (std::string(data.begin(), data.begin() + 5) != head)
        throw std::runtime_error(path + ": unexpected data.pkl");
      const std::string add = std::string("\x80\x04}q\x00", 5) + binunicode("evil") + payload + "s\x80\x02";
      data.erase(data.begin(), data.begin() + 5);
      data.insert(data.begin(), add.begin(), add.end());
      spliced = true;
    }
    zip.add(name, data);
  }
  zip.finish();
  if (!spliced) throw std::runtime_error(path + ": no data.pkl");
  write_text(path, std::string(sink.data.begin(), sink.data.end()));
  return ckpt;
}

QJsonObject json_of(const RunResult& r) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(r.out)).object();
}

std::vector<QJsonObject> unsafe_findings(const RunResult& r) {
  std::vector<QJsonObject> out;
  for (const auto& v : json_of(r)["findings"].toArray())
    if (v.toObject()["code"].toString() == "unsafe-pickle") out.push_back(v.toObject());
  return out;
}

}  // namespace

class TestPickleSafety : public QObject {
  Q_OBJECT
  std::string hostile_;

 private slots:
  void initTestCase() {
    const auto f = pickle_fixtures();
    QVERIFY2(f.error.empty(), f.error.c_str());
    hostile_ = f.root + "/hostile";
  }

  // Each payload Python executes is an error naming the callable the stream reaches (nested ones through the
  // loader they are handed to); none of them is executed by reading.
  void codeRunningPicklesAreErrors() {
    const QJsonObject table = read_json(hostile_ + "/hostile.json");
    TempDir dir;
    int executing = 0;
    for (auto it = table.begin(); it != table.end(); ++it) {
      const QJsonObject e = it.value().toObject();
      const std::string file = it.key().toStdString();
      const std::string pt = dir.file(file + ".pt");
      wrap_as_torch_file(read_bytes(hostile_ + "/" + file), pt);
      const auto hazards = pickle_hazards_of_file(pt, file);  // never throws, whatever the stream holds
      if (!e["executes"].toBool()) continue;
      ++executing;
      QVERIFY2(worst_severity(hazards) == "error", (file + listing(hazards)).c_str());
      for (const auto& g : e["globals"].toArray())
        QVERIFY2(has_error_for(hazards, g.toString().toStdString()),
                 (file + ": " + g.toString().toStdString() + " not named" + listing(hazards)).c_str());
      for (const auto& g : e["nested"].toArray())
        QVERIFY2(has_error_for(hazards, g.toString().toStdString(), "nested pickle"),
                 (file + ": nested " + g.toString().toStdString() + " not named" + listing(hazards)).c_str());
      for (const auto& h : hazards) {
        QCOMPARE(h.file, file);
        QCOMPARE(h.record, std::string("archive/data.pkl"));
        QVERIFY(!h.how.empty());
      }
    }
    QVERIFY2(executing >= 10, std::to_string(executing).c_str());
  }

  // How a callable is reached is told apart: REDUCE, NEWOBJ, BUILD, INST, OBJ, a computed callable.
  void howEachCallableIsReached() {
    TempDir dir;
    auto hazards_of = [&](const std::string& name) {
      wrap_as_torch_file(read_bytes(hostile_ + "/" + name + ".pkl"), dir.file(name + ".pt"));
      return pickle_hazards_of_file(dir.file(name + ".pt"), name);
    };
    QVERIFY(has_error_for(hazards_of("os_system"), "os.system", "REDUCE"));
    QVERIFY(has_error_for(hazards_of("inst_system"), "os.system", "INST"));
    QVERIFY(has_error_for(hazards_of("obj_system"), "os.system", "OBJ"));
    QVERIFY(has_error_for(hazards_of("newobj_popen"), "subprocess.Popen", "NEWOBJ"));
    QVERIFY(has_error_for(hazards_of("build_setstate"), "os.system", "BUILD"));
    QVERIFY(has_error_for(hazards_of("import_chain"), "<result of builtins.getattr>", "REDUCE"));
    // Refused by ckptdoc (too deep) but run by Python: still reported from what was read before the limit.
    QVERIFY(has_error_for(hazards_of("nested_reduce_deep"), "os.system", "REDUCE"));
  }

  // The rule's lower tiers: an unknown class is an error, an unknown DeepSpeed class is info, an enum member
  // looked up on a known class is nothing, an unknown module named but never called is a warning.
  void severityRule() {
    auto judge = [](std::vector<PickleUse> uses) { return assess_pickle_uses(uses, "f.pt"); };
    PickleUse u;
    u.record = "archive/data.pkl";
    u.count = 1;
    u.callable = "mypackage.Model";
    u.how = PickleUseKind::NewObj;
    QCOMPARE(worst_severity(judge({u})), std::string("error"));
    // An allow-listed package is not an allow-listed function: an unknown callable in one is called by
    // torch.load.
    u.callable = "deepspeed.runtime.some_future_module.NewState";
    QCOMPARE(worst_severity(judge({u})), std::string("warning"));
    u.callable = "torch.nn.functional.relu";
    u.how = PickleUseKind::Reduce;
    QCOMPARE(worst_severity(judge({u})), std::string("warning"));
    u.how = PickleUseKind::NewObj;
    u.callable = "collections.OrderedDict";
    QVERIFY(judge({u}).empty());
    u.callable = "mypackage.helpers";
    u.how = PickleUseKind::Global;
    QCOMPARE(worst_severity(judge({u})), std::string("warning"));
    u.callable = "os.system";  // named only, still an error
    QCOMPARE(worst_severity(judge({u})), std::string("error"));
    PickleUse g = u;
    g.callable = "builtins.getattr";
    g.how = PickleUseKind::Reduce;
    g.attribute_of = "deepspeed.runtime.zero.config.ZeroStageEnum";
    g.attribute = "gradients";
    QVERIFY(judge({g}).empty());
    g.attribute = "__class__";
    QCOMPARE(worst_severity(judge({g})), std::string("error"));
    g.attribute = "system";
    g.attribute_of = "os";
    QCOMPARE(worst_severity(judge({g})), std::string("error"));
  }

  // Megatron-LM's saved args (model_optim_rng.pt, megatron.training 0.18.0): getattr(AttnBackend, "auto")
  // and the constant signal.SIGTERM named by a GLOBAL are nothing to report; any other member of module
  // signal, called or named, stays an error, and getattr on os still is.
  void megatronArgsEnumsAndExitSignalAreKnown() {
    auto judge = [](std::vector<PickleUse> uses) { return assess_pickle_uses(uses, "model_optim_rng.pt"); };
    PickleUse g;
    g.record = "model_optim_rng/data.pkl";
    g.count = 1;
    g.callable = "builtins.getattr";
    g.how = PickleUseKind::Reduce;
    g.attribute_of = "megatron.core.transformer.enums.AttnBackend";
    g.attribute = "auto";
    QVERIFY(judge({g}).empty());
    PickleUse sig = g;
    sig.callable = "signal.SIGTERM";
    sig.how = PickleUseKind::Global;
    sig.attribute_of.clear();
    sig.attribute.clear();
    QVERIFY(judge({sig}).empty());
    sig.callable = "signal.signal";
    QCOMPARE(worst_severity(judge({sig})), std::string("error"));
    sig.how = PickleUseKind::Reduce;
    QCOMPARE(worst_severity(judge({sig})), std::string("error"));
    g.attribute_of = "os";
    g.attribute = "system";
    QCOMPARE(worst_severity(judge({g})), std::string("error"));
  }

  // Issue 24: a GLOBAL is judged by what Python's find_class reaches, not by how it reads. A dotted name is
  // walked attribute by attribute (protocol 4), through the modules a package imports (torch's os), so torch
  // / os.system is os.system; torch.fx and numpy's _datasource hold exec and open although torch and numpy
  // are allow-listed.
  void dottedNamesAreJudgedByWhatTheyReach() {
    TempDir dir;
    struct Case {
      const char* name;
      std::string pickle;
      const char* callable;
      const char* reaches;  // "" when it reaches what it reads as
    };
    const std::vector<Case> cases{
        {"torch / os.system", "\x80\x04" + torch_os_system() + ".", "torch.os.system", "os.system"},
        {"STACK_GLOBAL torch.serialization / os.system", "\x80\x04" + serialization_os_system() + ".",
         "torch.serialization.os.system", "os.system"},
        {"torch / os.path.basename", "\x80\x04" + call1(global("torch", "os.path.basename"), "/a") + ".",
         "torch.os.path.basename", "os.path.basename"},
        {"torch.fx.graph_module._exec_with_source", "\x80\x02" + fx_exec_with_source() + ".",
         "torch.fx.graph_module._exec_with_source", ""},
        {"torch / fx.graph_module._exec_with_source",
         "\x80\x04" + global("torch", "fx.graph_module._exec_with_source") + "(" + binunicode("print(1)") +
             "}tR.",
         "torch.fx.graph_module._exec_with_source", ""},
        {"numpy / lib._datasource._open (builtins.open)",
         "\x80\x04" + call1(global("numpy", "lib._datasource._open"), "/etc/hostname") + ".",
         "numpy.lib._datasource._open", ""},
        {"torch / _C.__builtins__.eval (walk through a dunder)",
         "\x80\x04" + call1(global("torch", "_C.__builtins__.eval"), "1") + ".", "torch._C.__builtins__.eval",
         "builtins.eval"},
        {"torch / load.__globals__, only named", "\x80\x04" + global("torch", "load.__globals__") + ".",
         "torch.load.__globals__", ""},
        {"torch / os, the module itself", "\x80\x02" + global("torch", "os") + ".", "torch.os", "os"},
        // The same flattened name, once harmless (no module torch.os) and once walked: both are judged.
        {"torch.os / system, then torch / os.system",
         "\x80\x04" + global("torch.os", "system") + "0" + torch_os_system() + ".", "torch.os.system",
         "os.system"},
    };
    int i = 0;
    for (const auto& c : cases) {
      const std::string pt = dir.file(std::to_string(i++) + ".pt");
      wrap_as_torch_file(bytes_of(c.pickle), pt);
      const auto hazards = pickle_hazards_of_file(pt, "f.pt");
      const auto it = std::find_if(hazards.begin(), hazards.end(), [&](const PickleHazard& h) {
        return h.severity == "error" && h.callable == c.callable && h.reaches == c.reaches;
      });
      QVERIFY2(it != hazards.end(), (std::string(c.name) + listing(hazards)).c_str());
      if (*c.reaches) QVERIFY2(it->message().find(c.reaches) != std::string::npos, it->message().c_str());
    }
    // Reconstructors reached by a walk are still the reconstructors; a walk to an unknown torch function is
    // not.
    wrap_as_torch_file(bytes_of("\x80\x04" + global("torch", "_utils._rebuild_tensor_v2") +
                                call1(global("torch.serialization", "_get_layout"), "torch.strided") + "0."),
                       dir.file("k.pt"));
    QVERIFY2(pickle_hazards_of_file(dir.file("k.pt"), "k.pt").empty(),
             listing(pickle_hazards_of_file(dir.file("k.pt"), "k.pt")).c_str());
    wrap_as_torch_file(bytes_of("\x80\x04" + call1(global("torch", "nn.functional.gelu"), "x") + "."),
                       dir.file("u.pt"));
    QCOMPARE(worst_severity(pickle_hazards_of_file(dir.file("u.pt"), "u.pt")), std::string("warning"));
  }

  // The same payloads inside a real DeepSpeed checkpoint: diagnose exits 1 on an unsafe-pickle error that
  // names what the name reaches, and repair refuses to copy or rewrite the file without
  // --allow-unsafe-pickle.
  void dottedPayloadsInACheckpointAreErrors_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QByteArray>("payload");
    QTest::addColumn<QString>("callable");
    QTest::addColumn<QString>("reaches");
    const QString model = "mp_rank_00_model_states.pt", rank = "zero_pp_rank_0_mp_rank_00_optim_states.pt";
    auto bytes = [](const std::string& s) { return QByteArray(s.data(), static_cast<qsizetype>(s.size())); };
    QTest::newRow("torch / os.system, model file")
        << model << bytes(torch_os_system()) << QString("torch.os.system") << QString("os.system");
    QTest::newRow("torch.serialization / os.system, rank file")
        << rank << bytes(serialization_os_system()) << QString("torch.serialization.os.system")
        << QString("os.system");
    QTest::newRow("torch.fx _exec_with_source, rank file")
        << rank << bytes(fx_exec_with_source()) << QString("torch.fx.graph_module._exec_with_source")
        << QString();
  }
  void dottedPayloadsInACheckpointAreErrors() {
    QFETCH(QString, file);
    QFETCH(QByteArray, payload);
    QFETCH(QString, callable);
    QFETCH(QString, reaches);
    TempDir dir;
    const std::string ckpt = checkpoint_carrying(dir, file.toStdString(), payload.toStdString());

    auto r = run_cli({"diagnose", ckpt, "--json", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 1);
    const auto found = unsafe_findings(r);
    QVERIFY2(!found.empty(), r.out.c_str());
    const auto d = found[0]["details"].toObject();
    QCOMPARE(found[0]["severity"].toString(), QString("error"));
    QCOMPARE(d["file"].toString(), file);
    QCOMPARE(d["callable"].toString(), callable);
    QCOMPARE(d["reaches"].toString(), reaches);
    QCOMPARE(d["how"].toString(), QString("REDUCE"));

    const std::string out = dir.file("out");
    r = run_cli({"repair", ckpt, "-o", out, "--reset-optimizer", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    QVERIFY2(r.err.find("unsafe-pickle") != std::string::npos &&
                 r.err.find(file.toStdString()) != std::string::npos &&
                 r.err.find("--allow-unsafe-pickle") != std::string::npos,
             r.err.c_str());
    QVERIFY(!std::filesystem::exists(out));
  }

  // With --allow-unsafe-pickle the repair rewrites the rank file at protocol 2, and the rewritten file still
  // reaches what the input reached: torch.load of it gives the same value (a harmless os.path.basename call),
  // and ckptdoc still reports it.
  void repairedRankFileReachesWhatTheInputReached() {
    TempDir dir;
    const std::string rank = "zero_pp_rank_0_mp_rank_00_optim_states.pt";
    const std::string ckpt =
        checkpoint_carrying(dir, rank, call1(global("torch", "os.path.basename"), "/tmp/evil.txt"));
    const std::string out = dir.file("out");
    auto r = run_cli({"repair", ckpt, "-o", out, "--reset-optimizer", "--device", "cpu"});
    CKPTDOC_EXPECT_EXIT(r, 2);
    r = run_cli({"repair", ckpt, "-o", out, "--reset-optimizer", "--device", "cpu", "--allow-unsafe-pickle"});
    CKPTDOC_EXPECT_EXIT(r, 0);
    const std::string repaired = out + "/global_step5/" + rank;
    QCOMPARE(worst_severity(pickle_hazards_of_file(repaired, rank)), std::string("error"));
    for (const std::string& f : {ckpt + "/global_step5/" + rank, repaired}) {
      const auto p = run_python(script("fixtures/ds_check.py"), {"value", f, "evil"});
      QVERIFY2(p.exit_code == 0, (f + ": " + p.out + p.err).c_str());
      QCOMPARE(p.out, std::string("'evil.txt'\n"));
    }
  }

  // PickleUseMemo, for a job's per-rank files that share their pickle: real DeepSpeed's two ZeRO-3 model
  // files hold the same data.pkl under different records, and two hostile pickles of the same length reach
  // different callables. Through the memo each file gets what reading it alone gives, under its own record.
  void memoGivesEachFileItsOwnUses() {
    TempDir dir;
    const std::string reaches_torch_os = call1(global("torch", "os.system"), "echo pwned");
    const std::string reaches_posix = call1(global("posix", "system"), "echo pwned!!!");
    QCOMPARE(reaches_posix.size(), reaches_torch_os.size());
    std::vector<std::string> files;
    for (const auto& [name, pickle] :
         {std::pair{"rank_1", reaches_torch_os}, std::pair{"rank_2", reaches_torch_os},
          std::pair{"rank_3", reaches_posix}, std::pair{"rank_4", reaches_torch_os}}) {
      files.push_back(dir.file(std::string(name) + ".pt"));
      wrap_as_torch_file(bytes_of(pickle), files.back(), name);
    }
    const std::string ds = deepspeed_fixture("zero3_fp16_ws2") + "/checkpoint/global_step5/";
    files.push_back(ds + "zero_pp_rank_0_mp_rank_00_model_states.pt");
    files.push_back(ds + "zero_pp_rank_1_mp_rank_00_model_states.pt");
    files.push_back(dir.file("notes.txt"));
    write_text(files.back(), "not a torch file");

    PickleUseMemo memo;
    for (const auto& f : files) {
      const std::string alone = describe(TorchFile::pickle_uses_of(f));
      QCOMPARE(describe(memo.uses_of(f)), alone);
      if (f.ends_with(".pt")) QVERIFY2(!alone.empty(), f.c_str());
    }
    QVERIFY(describe(TorchFile::pickle_uses_of(files[2])).find("rank_3/data.pkl | posix.system") !=
            std::string::npos);
  }

  // A GLOBAL spelled out again for each call (writers that do not memoize globals: ckptdoc's synthetic one
  // names _rebuild_tensor_v2 once per tensor): each use is counted once per occurrence, with the first one's
  // offset, also when the stream is refused after them (the VM counts repeats itself and merges them into
  // the log as the stream ends, on every path).
  void repeatedGlobalsAreCountedOnEveryPath() {
    TempDir dir;
    std::string calls;
    for (int i = 0; i < 3; ++i) calls += call1(global("posix", "system"), "echo " + std::to_string(i));
    calls += call1(global("builtins", "getattr"), "x");  // recorded in full each time: args matter
    const std::string body = std::string("\x80\x02]") + "(" + calls + "e";
    const std::string whole = dir.file("whole.pt"), cut = dir.file("cut.pt");
    wrap_as_torch_file(bytes_of(body + "."), whole);
    wrap_as_torch_file(bytes_of(body + "t"), cut);  // TUPLE without a MARK: refused after the calls
    for (const auto& path : {whole, cut}) {
      const auto uses = TorchFile::pickle_uses_of(path);
      auto find = [&](PickleUseKind how) -> const PickleUse* {
        for (const auto& u : uses)
          if (u.callable == "posix.system" && u.how == how) return &u;
        return nullptr;
      };
      const PickleUse* g = find(PickleUseKind::Global);
      const PickleUse* r = find(PickleUseKind::Reduce);
      QVERIFY2(g && r, (path + ":\n" + describe(uses)).c_str());
      QCOMPARE(g->count, uint64_t{3});
      QCOMPARE(r->count, uint64_t{3});
      QCOMPARE(g->offset, uint64_t{4});  // PROTO 2, EMPTY_LIST, MARK, then the first GLOBAL
      QVERIFY(std::any_of(uses.begin(), uses.end(), [](const PickleUse& u) {
        return u.callable == "builtins.getattr" && u.how == PickleUseKind::Reduce && u.count == 1;
      }));
    }
  }

  // Every file real DeepSpeed wrote (the shared fixtures): no hazard of any severity.
  void realCheckpointFilesCarryNoHazard() {
    int files = 0;
    for (const char* n :
         {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2", "bf16opt_zero1_ws2"}) {
      for (const auto& entry :
           std::filesystem::recursive_directory_iterator(deepspeed_fixture(n) + "/checkpoint")) {
        if (!entry.is_regular_file() || entry.path().extension() != ".pt") continue;
        const auto hazards = pickle_hazards_of_file(entry.path().string(), entry.path().filename().string());
        QVERIFY2(hazards.empty(), (entry.path().string() + listing(hazards)).c_str());
        ++files;
      }
    }
    QVERIFY(files >= 10);
  }

  // Checking a cold file for hazards reads its head, pickle and directory, not the device's read-ahead window
  // around its first byte (8 MB a file on the benchmark VM: wasted on a save of many big files). A 24 MB
  // record follows the pickle; a plain first touch of the evicted file is the control. With a memo too (the
  // catalog's way), which reads the pickle through its own path.
  void coldCheckReadsNoReadAheadWindow() {
    TempDir dir;
    const std::string path = dir.file("big.pt");
    write_torch_zip_with_big_record(path);
    size_t control = 0;
    if (const std::string why = why_read_ahead_unobservable(path, &control); !why.empty()) QSKIP(why.c_str());
    PickleUseMemo memo;
    for (PickleUseMemo* m : {static_cast<PickleUseMemo*>(nullptr), &memo}) {
      evict(path);
      if (resident_bytes(path) > 0) QSKIP("the file's pages could not be evicted (a busy machine)");
      QVERIFY(pickle_hazards_of_file(path, "big.pt", m).empty());
      const size_t read = resident_bytes(path);
      const std::string what = std::to_string(read) + " bytes read by the check" +
                               (m ? " with a memo, " : ", ") + std::to_string(control) +
                               " by a plain first touch";
      QVERIFY2(read < (128u << 10), what.c_str());  // a page or a folio at each end
    }
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestPickleSafety)
#include "test_pickle_safety.moc"
