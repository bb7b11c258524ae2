#pragma once
// Generates the pickle fixtures (tests/fixtures/make_pickles.py, make_hostile_pickles.py) once per build tree
// and reuses them while the generators are unchanged: every Qt Test function runs in its own process.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

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
  for (const char* s : {"fixtures/make_pickles.py", "fixtures/make_hostile_pickles.py", "fixtures/pickle_json.py"})
    sources += read_text(script(s));
  const std::string stamp = std::to_string(std::hash<std::string>{}(sources));
  if (std::filesystem::exists(f.root + "/stamp") && read_text(f.root + "/stamp") == stamp) return f;
  const std::string tmp = f.root + ".tmp-" + std::to_string(::getpid());
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  auto r = run_python(script("fixtures/make_pickles.py"), {tmp + "/out"});
  if (r.exit_code == 0) r = run_python(script("fixtures/make_hostile_pickles.py"), {tmp + "/hostile", f.marker});
  if (r.exit_code != 0) {
    f.error = "fixture generation failed: " + r.err;
    std::filesystem::remove_all(tmp);
    return f;
  }
  write_text(tmp + "/stamp", stamp);
  std::error_code ec;
  std::filesystem::remove_all(f.root, ec);
  std::filesystem::rename(tmp, f.root, ec);
  if (ec) std::filesystem::remove_all(tmp, ec);  // another process won the race; its copy is identical
  return f;
}

}  // namespace ckptdoc::test
