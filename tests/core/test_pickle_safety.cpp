// Pickle safety (pickle_safety.h): every hostile pickle that really runs code under Python's pickle.loads (the
// fixture generator proves it in a child process) is reported as an unsafe-pickle error naming its callable,
// inside a torch.save zip as a checkpoint would carry it; files DeepSpeed really wrote carry no hazard at all.
#include <QJsonArray>
#include <QJsonObject>
#include <QtTest>
#include <algorithm>
#include <filesystem>

#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/zip_writer.h"
#include "pickle_fixtures.h"
#include "test_support.h"

using namespace ckptdoc;
using namespace ckptdoc::test;

namespace {

// A torch.save-shaped zip whose data.pkl is `pickle` (how a hostile pickle rides in a checkpoint file).
void wrap_as_torch_file(const std::vector<uint8_t>& pickle, const std::string& path) {
  VectorSink sink;
  ZipWriter zip(sink);
  zip.add("archive/data.pkl", pickle);
  const std::string version = "3\n";
  zip.add("archive/version", std::span(reinterpret_cast<const uint8_t*>(version.data()), version.size()));
  zip.finish();
  write_text(path, std::string(sink.data.begin(), sink.data.end()));
}

std::string listing(const std::vector<PickleHazard>& hs) {
  std::string s;
  for (const auto& h : hs) s += "\n  " + h.severity + " " + h.message();
  return s.empty() ? " (none)" : s;
}

bool has_error_for(const std::vector<PickleHazard>& hs, const std::string& callable, const std::string& how_part = "") {
  return std::any_of(hs.begin(), hs.end(), [&](const PickleHazard& h) {
    return h.severity == "error" && h.callable == callable && h.how.find(how_part) != std::string::npos;
  });
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
        QVERIFY2(has_error_for(hazards, g.toString().toStdString()), (file + ": " + g.toString().toStdString() +
                                                                      " not named" + listing(hazards)).c_str());
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
    u.callable = "deepspeed.runtime.some_future_module.NewState";
    QCOMPARE(worst_severity(judge({u})), std::string("info"));
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

  // Every file real DeepSpeed wrote (the shared fixtures): no hazard of any severity.
  void realCheckpointFilesCarryNoHazard() {
    int files = 0;
    for (const char* n : {"zero1_fp16_ws2", "zero2_fp16_ws2", "zero2_bf16_ws2", "zero3_fp16_ws2", "bf16opt_zero1_ws2"}) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(deepspeed_fixture(n) + "/checkpoint")) {
        if (!entry.is_regular_file() || entry.path().extension() != ".pt") continue;
        const auto hazards = pickle_hazards_of_file(entry.path().string(), entry.path().filename().string());
        QVERIFY2(hazards.empty(), (entry.path().string() + listing(hazards)).c_str());
        ++files;
      }
    }
    QVERIFY(files >= 10);
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestPickleSafety)
#include "test_pickle_safety.moc"
