#pragma once
// Fixtures a generator script writes (torch or a spec-only writer, never ckptdoc), made once per build tree
// and reused by every ctest entry: each Qt Test function runs in its own process, and initTestCase used to
// run the generator again in each (issue #27). The folder is kept while the generator's sources and the
// interpreter are unchanged; it is read-only input, so tests write their outputs elsewhere. Generation
// happens on first use, so `ctest -R one_test` and running one test executable by hand work alone; a lock
// keeps ctest -j's entries from generating it twice at once.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "test_support.h"

namespace ckptdoc::test {

struct GeneratedFixture {
  std::string dir;    // the generated folder (read-only input)
  std::string error;  // set when generation failed
};

// Where generated fixtures live: <build>/test-fixtures (a temporary folder's when no build tree is named).
inline std::string fixtures_base() {
  const char* bin = std::getenv("CKPTDOC_BINARY_DIR");
  return (bin && *bin ? std::string(bin) : std::filesystem::temp_directory_path().string()) +
         "/test-fixtures";
}

// name: the folder's name under fixtures_base(); sources: the generator's files (tests/<relative>),
// whose contents key the cache; make: writes the fixtures into the (empty) folder it is given.
inline GeneratedFixture generated_fixture(const std::string& name, const std::vector<std::string>& sources,
                                          const std::function<RunResult(const std::string& dir)>& make) {
  const std::string base = fixtures_base();
  GeneratedFixture f;
  f.dir = base + "/" + name;
  std::string key = python();
  for (const auto& s : sources) key += "\n" + s + "\n" + read_text(script(s));
  const std::string stamp = std::to_string(std::hash<std::string>{}(key));
  const std::string stamp_file = base + "/" + name + ".stamp";
  auto current = [&] { return std::filesystem::exists(stamp_file) && read_text(stamp_file) == stamp; };
  if (current()) return f;
  std::filesystem::create_directories(base);
  const int lock = ::open((base + "/" + name + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    f.error = "cannot lock " + base + "/" + name + ".lock";
    if (lock >= 0) ::close(lock);
    return f;
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};
  if (current()) return f;  // another entry made it while this one waited
  // Written in place (a generator may record absolute paths), the stamp last: a folder without its stamp is
  // never used, and is made again.
  std::error_code ec;
  std::filesystem::remove(stamp_file, ec);
  std::filesystem::remove_all(f.dir, ec);
  std::filesystem::create_directories(f.dir);
  const auto r = make(f.dir);
  if (r.exit_code != 0) {
    f.error = name + " fixture generation failed (" + std::to_string(r.exit_code) + "): " + r.out + r.err;
    return f;
  }
  write_text(stamp_file, stamp);
  return f;
}

}  // namespace ckptdoc::test
