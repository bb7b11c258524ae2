// The source registry (#27): a tiny fake format defined here registers itself at run time and is found for
// its folder only; inspect and diagnose reach it through the registry; a command it cannot do is refused with
// its capabilities; and the built-in sources still read the committed DCP and DeepSpeed fixtures as before.
#include <QtTest>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/registry.h"
#include "test_support.h"

using namespace ckptdoc;
using sources::Command;
namespace fs = std::filesystem;

namespace {

// The fake format: `fake.manifest` lists "name count" per line; `fake.bin` holds the float32 values of every
// array in manifest order.
struct FakeArray {
  std::string name;
  size_t count = 0;
};

std::vector<FakeArray> read_manifest(const std::string& dir) {
  std::ifstream in(dir + "/fake.manifest");
  std::vector<FakeArray> arrays;
  FakeArray a;
  while (in >> a.name >> a.count) arrays.push_back(a);
  return arrays;
}

class FakeSource final : public sources::Source {
 public:
  std::string_view name() const override { return "fake"; }
  std::string_view description() const override { return "a fake test checkpoint"; }
  bool probe(const std::string& path) const override {
    std::error_code ec;
    return fs::is_regular_file(fs::path(path) / "fake.manifest", ec);
  }
  bool can(Command command) const override {
    return command == Command::Inspect || command == Command::Diagnose;
  }

  sources::Outcome inspect(const sources::InspectRequest& request) const override {
    const auto arrays = read_manifest(request.path);
    if (request.json) {
      nlohmann::json j{{"format", "fake"}, {"arrays", nlohmann::json::array()}};
      for (const auto& a : arrays) j["arrays"].push_back({{"name", a.name}, {"count", a.count}});
      return {j.dump() + "\n", 0};
    }
    std::string text = "Fake checkpoint\n";
    for (const auto& a : arrays) text += "  " + a.name + " " + std::to_string(a.count) + "\n";
    return {text, 0};
  }

  // Names every array holding a NaN or Inf; exit 1 when one does.
  sources::Outcome diagnose(const sources::DiagnoseRequest& request) const override {
    std::ifstream bin(request.path + "/fake.bin", std::ios::binary);
    std::string text;
    for (const auto& a : read_manifest(request.path)) {
      std::vector<float> v(a.count);
      bin.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
      size_t bad = 0;
      for (const float x : v) bad += std::isfinite(x) ? 0 : 1;
      if (bad) text += "fake-non-finite " + a.name + " " + std::to_string(bad) + "\n";
    }
    return {text.empty() ? "clean\n" : text, text.empty() ? 0 : 1};
  }
};

// Registered for one test function's life.
class RegisteredFake {
 public:
  RegisteredFake() { sources::register_source(std::make_shared<FakeSource>()); }
  ~RegisteredFake() { sources::unregister_source("fake"); }
  RegisteredFake(const RegisteredFake&) = delete;
  RegisteredFake& operator=(const RegisteredFake&) = delete;
};

std::string write_fake(const test::TempDir& dir,
                       const std::vector<std::pair<FakeArray, std::vector<float>>>& arrays) {
  const std::string path = dir.file("fake_ckpt");
  fs::create_directories(path);
  std::ofstream manifest(path + "/fake.manifest");
  std::ofstream bin(path + "/fake.bin", std::ios::binary);
  for (const auto& [a, values] : arrays) {
    manifest << a.name << " " << a.count << "\n";
    bin.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
  }
  return path;
}

std::string healthy_fake(const test::TempDir& dir) {
  return write_fake(dir, {{{"embed", 3}, {1.f, 2.f, 3.f}}, {{"head", 2}, {0.5f, -0.5f}}});
}

std::string dcp_fixture() {
  return test::fixtures_dir() + "/dcp/fsdp2_ws2";
}
std::string deepspeed_fixture() {
  return test::deepspeed_fixture("zero2_fp16_ws2") + "/checkpoint";
}

std::string refusal_text(const std::function<void()>& f, ErrorKind& kind) {
  try {
    f();
  } catch (const Error& e) {
    kind = e.kind();
    return e.what();
  }
  return {};
}

sources::ExportRequest export_request(const std::string& path, const std::string& output) {
  sources::ExportRequest request;
  request.path = path;
  request.output = output;
  return request;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

class TestSourceRegistry : public QObject {
  Q_OBJECT
 private slots:
  void builtInSourcesTakeTheirFixtures() {
    test::TempDir dir;
    const std::string fake = healthy_fake(dir);
    QCOMPARE(std::string(sources::find_source(dcp_fixture())->name()), std::string("dcp"));
    QCOMPARE(std::string(sources::find_source(deepspeed_fixture())->name()), std::string("checkpoint"));
    // Not registered: the catalog source, last, takes the fake folder like any path no source claims.
    QCOMPARE(std::string(sources::find_source(fake)->name()), std::string("checkpoint"));
    QVERIFY(sources::find_source(deepspeed_fixture())->reads_into_catalog());
    QVERIFY(!sources::find_source(dcp_fixture())->reads_into_catalog());
  }

  void registeredSourceClaimsOnlyItsFolder() {
    test::TempDir dir;
    const std::string fake = healthy_fake(dir);
    {
      const RegisteredFake registered;
      QCOMPARE(std::string(sources::find_source(fake)->name()), std::string("fake"));
      QCOMPARE(std::string(sources::find_source(dcp_fixture())->name()), std::string("dcp"));
      QCOMPARE(std::string(sources::find_source(deepspeed_fixture())->name()), std::string("checkpoint"));
      QCOMPARE(std::string(sources::all_sources().front()->name()), std::string("fake"));
    }
    QCOMPARE(std::string(sources::find_source(fake)->name()), std::string("checkpoint"));
  }

  void fakeIsInspectedAndDiagnosedThroughTheRegistry() {
    const RegisteredFake registered;
    test::TempDir dir;
    const std::string fake = healthy_fake(dir);
    const auto text = sources::source_for(fake, Command::Inspect)->inspect({.path = fake, .json = false});
    QCOMPARE(text.text, std::string("Fake checkpoint\n  embed 3\n  head 2\n"));
    QCOMPARE(text.exit_code, 0);
    const auto json =
        nlohmann::json::parse(sources::find_source(fake)->inspect({.path = fake, .json = true}).text);
    QCOMPARE(json["arrays"].size(), size_t{2});
    QCOMPARE(json["arrays"][1]["name"].get<std::string>(), std::string("head"));
    const auto clean = sources::source_for(fake, Command::Diagnose)->diagnose({.path = fake, .json = false});
    QCOMPARE(clean.exit_code, 0);
    QCOMPARE(clean.text, std::string("clean\n"));

    test::TempDir broken_dir;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::string broken =
        write_fake(broken_dir, {{{"embed", 3}, {1.f, nan, nan}}, {{"head", 2}, {0.5f, -0.5f}}});
    const auto sick =
        sources::source_for(broken, Command::Diagnose)->diagnose({.path = broken, .json = false});
    QCOMPARE(sick.exit_code, 1);
    QCOMPARE(sick.text, std::string("fake-non-finite embed 2\n"));
  }

  void unsupportedCommandIsRefusedWithItsCapabilities() {
    const RegisteredFake registered;
    test::TempDir dir;
    const std::string fake = healthy_fake(dir);
    ErrorKind kind = ErrorKind::Other;
    std::string what = refusal_text([&] { (void)sources::source_for(fake, Command::Export); }, kind);
    QCOMPARE(kind, ErrorKind::Unsupported);
    QVERIFY2(has(what, "a fake test checkpoint (source \"fake\")"), what.c_str());
    QVERIFY2(has(what, "`ckptdoc export` does not read it"), what.c_str());
    QVERIFY2(has(what, "reads it with `inspect` and `diagnose`"), what.c_str());
    // An operation the source does not override refuses the same way, if called anyway.
    kind = ErrorKind::Other;
    what = refusal_text(
        [&] { (void)sources::find_source(fake)->export_weights(export_request(fake, dir.file("o"))); }, kind);
    QCOMPARE(kind, ErrorKind::Unsupported);
    QVERIFY2(has(what, "`ckptdoc export` does not read it"), what.c_str());
    // The commands that open the catalog (repair, convert, diff, ...) are refused by Checkpoint::open.
    kind = ErrorKind::Other;
    what = refusal_text([&] { (void)deepspeed::Checkpoint::open(fake); }, kind);
    QCOMPARE(kind, ErrorKind::Unsupported);
    QVERIFY2(has(what, "(source \"fake\")") && has(what, "reads it with `inspect` and `diagnose`"),
             what.c_str());
  }

  // What test_dcp and test_dcp_export expect of the committed fixture, through the registry.
  void dcpFixtureThroughTheRegistryAsBefore() {
    const auto source = sources::find_source(dcp_fixture());
    QCOMPARE(source->supported_commands(),
             std::string("`inspect`, `diagnose`, `export`, `repair` and `diff`"));
    const auto ckpt = dcp::Checkpoint::open(dcp_fixture());
    const auto json = source->inspect({.path = dcp_fixture(), .json = true});
    QCOMPARE(json.text, dcp::metadata_json(*ckpt) + "\n");
    const auto text = source->inspect({.path = dcp_fixture(), .json = false});
    QVERIFY2(has(text.text, "keys      20 tensors") && has(text.text, "57 bytes items"), text.text.c_str());
    QVERIFY2(has(text.text, "none: every tensor's chunks tile its shape"), text.text.c_str());
    const auto diagnosis = source->diagnose({.path = dcp_fixture(), .json = false});
    QCOMPARE(diagnosis.exit_code, 0);
    QVERIFY2(has(diagnosis.text, "Adam step 3 for all 5 params"), diagnosis.text.c_str());
    const auto report_json =
        nlohmann::json::parse(source->diagnose({.path = dcp_fixture(), .json = true}).text);
    QCOMPARE(report_json.at("verdict").at("clean").get<bool>(), true);
    QCOMPARE(report_json.at("format").get<std::string>(), std::string("pytorch-dcp"));

    test::TempDir dir;
    const auto exported = source->export_weights(export_request(dcp_fixture(), dir.file("m.safetensors")));
    QCOMPARE(exported.tensors, size_t{5});
    QVERIFY(exported.non_finite.empty());
    QVERIFY2(has(exported.text, "wrote 5 tensors") &&
                 has(exported.text, "left out 15 optimizer/scheduler/train-state tensors and 57 bytes items"),
             exported.text.c_str());
    QVERIFY(fs::is_regular_file(dir.file("m.safetensors")));

    // The CLI prints the same, and refuses what DCP cannot do naming what it can.
    const auto cli = test::run_cli({"inspect", dcp_fixture()});
    CKPTDOC_EXPECT_EXIT(cli, 0);
    QCOMPARE(cli.out, text.text);
    const auto convert = test::run_cli({"convert", dcp_fixture(), "-o", dir.file("r"), "--to", "universal"});
    CKPTDOC_EXPECT_EXIT(convert, 2);
    QVERIFY2(has(convert.err, "(source \"dcp\")") &&
                 has(convert.err, "reads it with `inspect`, `diagnose`, `export`, `repair` and `diff`"),
             convert.err.c_str());
  }

  // The DeepSpeed family stays one source, read into the catalog, every command open to it.
  void deepspeedFixtureThroughTheRegistryAsBefore() {
    const auto source = sources::find_source(deepspeed_fixture());
    for (const Command c : {Command::Inspect, Command::Diagnose, Command::Export, Command::Repair,
                            Command::Convert, Command::Diff, Command::Watch})
      QVERIFY2(source->can(c), std::string(sources::command_name(c)).c_str());
    const auto ckpt = deepspeed::Checkpoint::open(deepspeed_fixture());
    QCOMPARE(ckpt->catalog().zero_stage, 2);
    QCOMPARE(ckpt->catalog().dp_world_size, 2);
    CKPTDOC_EXPECT_EXIT(test::run_cli({"diagnose", deepspeed_fixture()}), 0);
    const auto inspect = test::run_cli({"inspect", "--json", deepspeed_fixture()});
    CKPTDOC_EXPECT_EXIT(inspect, 0);
    QCOMPARE(nlohmann::json::parse(inspect.out)["zero_stage"].get<int>(), 2);
    test::TempDir dir;
    CKPTDOC_EXPECT_EXIT(test::run_cli({"export", deepspeed_fixture(), "-o", dir.file("m.safetensors")}), 0);
    QVERIFY(fs::is_regular_file(dir.file("m.safetensors")));
  }
};

CKPTDOC_TEST_MAIN_APPLESS(TestSourceRegistry)
#include "test_source_registry.moc"
