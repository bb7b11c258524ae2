#pragma once
// Generates the pickle fixtures (tests/fixtures/make_pickles.py, make_hostile_pickles.py) once per build tree
// and reuses them while the generators are unchanged: every Qt Test function runs in its own process.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

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
#include "test_support.h"

namespace ckptdoc::test {

struct PickleFixtures {
  std::string root;    // <root>/out/plain, <root>/out/torch, <root>/hostile
  std::string marker;  // the file hostile payloads would create
  std::string error;   // set when generation failed
};

inline PickleFixtures pickle_fixtures() {
  const char* bin = std::getenv("CKPTDOC_BINARY_DIR");
  const std::string base = bin && *bin ? bin : std::filesystem::temp_directory_path().string();
  PickleFixtures f;
  f.root = base + "/test-pickles";
  f.marker = base + "/test-pickles-MARKER";
  std::string sources;
  for (const char* s :
       {"fixtures/make_pickles.py", "fixtures/make_hostile_pickles.py", "fixtures/pickle_json.py"})
    sources += read_text(script(s));
  const std::string stamp = std::to_string(std::hash<std::string>{}(sources));
  if (std::filesystem::exists(f.root + "/stamp") && read_text(f.root + "/stamp") == stamp) return f;
  // One generator at a time: the payloads all touch the same marker, and a generator removes it between
  // payloads, so two running at once (ctest -j) see each other's marker come and go.
  std::filesystem::create_directories(base);
  const int lock = ::open((base + "/test-pickles.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    f.error = "cannot lock " + base + "/test-pickles.lock";
    if (lock >= 0) ::close(lock);
    return f;
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  if (std::filesystem::exists(f.root + "/stamp") && read_text(f.root + "/stamp") == stamp) return f;
  const std::string tmp = f.root + ".tmp-" + std::to_string(::getpid());
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  auto r = run_python(script("fixtures/make_pickles.py"), {tmp + "/out"});
  if (r.exit_code == 0)
    r = run_python(script("fixtures/make_hostile_pickles.py"), {tmp + "/hostile", f.marker});
  if (r.exit_code != 0) {
    f.error = "fixture generation failed: " + r.err;
    std::filesystem::remove_all(tmp);
    return f;
  }
  write_text(tmp + "/stamp", stamp);
  std::error_code ec;
  std::filesystem::remove_all(f.root, ec);
  std::filesystem::rename(tmp, f.root, ec);
  if (ec) f.error = "cannot move " + tmp + " to " + f.root + ": " + ec.message();
  return f;
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
