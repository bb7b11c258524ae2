#pragma once
// The pickle fixtures (tests/fixtures/make_pickles.py, make_hostile_pickles.py), made once per build tree by
// generated_fixture(): every Qt Test function runs in its own process.
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "ckptdoc/error.h"
#include "ckptdoc/format/value.h"
#include "generated_fixture.h"
#include "test_support.h"

namespace ckptdoc::test {

struct PickleFixtures {
  std::string root;    // <root>/out/plain, <root>/out/torch, <root>/hostile
  std::string marker;  // the file hostile payloads would create
  std::string error;   // set when generation failed
};

inline PickleFixtures pickle_fixtures() {
  // The payloads name the marker by its absolute path; it lies next to the folder, outside what tests read.
  // Generating under generated_fixture()'s lock matters here: a generator removes the marker between
  // payloads, so two at once (ctest -j) would see each other's marker come and go.
  const std::string marker = fixtures_base() + "/pickles-MARKER";
  const auto g = generated_fixture(
      "pickles", {"fixtures/make_pickles.py", "fixtures/make_hostile_pickles.py", "fixtures/pickle_json.py"},
      [&](const std::string& dir) {
        auto r = run_python(script("fixtures/make_pickles.py"), {dir + "/out"});
        if (r.exit_code == 0)
          r = run_python(script("fixtures/make_hostile_pickles.py"), {dir + "/hostile", marker});
        return r;
      });
  return {g.dir, marker, g.error};
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline QJsonObject read_json(const std::string& path) {
  QFile f(QString::fromStdString(path));
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(f.readAll()).object();
}

// persistent_load for an unpacked torch checkpoint: ('storage', Global(torch, XStorage), key, location,
// numel).
inline std::function<ckptdoc::Value(const ckptdoc::Value&)> storage_loader(const std::string& dir) {
  auto cache = std::make_shared<std::map<std::string, std::shared_ptr<ckptdoc::Storage>>>();
  return [dir, cache](const ckptdoc::Value& pid) -> ckptdoc::Value {
    const auto& t = pid.items();
    if (t.size() != 5 || t[0].as_str() != "storage") throw ckptdoc::Error("", "", "bad pid " + pid.repr());
    const auto dtype = ckptdoc::dtype_from_storage_class(t[1].as_global().second);
    if (!dtype) throw ckptdoc::Error("", "", "unknown storage class");
    const std::string key = t[2].as_str();
    if (auto it = cache->find(key); it != cache->end()) return ckptdoc::Value::storage(it->second);
    auto bytes = read_bytes(dir + "/data/" + key);
    if (bytes.size() != static_cast<uint64_t>(t[4].as_int()) * ckptdoc::element_size(*dtype))
      throw ckptdoc::Error("", "", "record size mismatch");
    auto s = ckptdoc::Storage::from_bytes(*dtype, std::move(bytes), key);
    s->location = t[3].as_str();
    (*cache)[key] = s;
    return ckptdoc::Value::storage(s);
  };
}

}  // namespace ckptdoc::test
