#pragma once
// Fixtures a generator script writes (torch or a spec-only writer, never ckptdoc), made once per build tree
// and reused by every ctest entry: each Qt Test function runs in its own process, and initTestCase used to
// run the generator again in each (issue #27). The folder is kept while the generator's sources, the
// interpreter and its torch are unchanged; it is read-only input, so tests write their outputs elsewhere.
// Generation happens on first use, so `ctest -R one_test` and running one test executable by hand work alone;
// a lock keeps ctest -j's entries from generating it twice at once.
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

// The interpreter's torch/version.py (its __version__ and git_version), "" without torch. Found by asking the
// interpreter where torch lies without importing it (~0.1 s; an import is 7-10 s here), once per build tree:
// the answer is kept in `base` while that file exists, and an upgrade in place rewrites it, which changes
// the fixtures' key.
inline std::string torch_version_file(const std::string& base) {
  const std::string cache = base + "/torch-of-python", py = python();
  if (std::filesystem::exists(cache)) {
    const std::string kept = read_text(cache);
    const auto nl = kept.find('\n');
    if (nl != std::string::npos && kept.substr(0, nl) == py && std::filesystem::exists(kept.substr(nl + 1)))
      return kept.substr(nl + 1);
  }
  const auto r =
      run(py, {"-c",
               "import importlib.util as u, os; s = u.find_spec('torch'); "
               "print(os.path.join(s.submodule_search_locations[0], 'version.py') if s else '', end='')"});
  if (r.exit_code != 0 || r.out.empty()) return "";
  // Entries of ctest -j write it at once: each writes its own file and renames it into place.
  const std::string tmp = cache + ".tmp-" + std::to_string(::getpid());
  write_text(tmp, py + "\n" + r.out);
  std::error_code ec;
  std::filesystem::rename(tmp, cache, ec);
  return r.out;
}

// name: the folder's name under fixtures_base(); sources: the generator's files (tests/<relative>),
// whose contents key the cache with the interpreter and its torch version; make: writes the fixtures into the
// (empty) folder it is given.
inline GeneratedFixture generated_fixture(const std::string& name, const std::vector<std::string>& sources,
                                          const std::function<RunResult(const std::string& dir)>& make) {
  const std::string base = fixtures_base();
  GeneratedFixture f;
  f.dir = base + "/" + name;
  std::filesystem::create_directories(base);
  std::string key = python();
  if (const std::string torch = torch_version_file(base); !torch.empty())
    key += "\n" + torch + "\n" + read_text(torch);
  for (const auto& s : sources) key += "\n" + s + "\n" + read_text(script(s));
  const std::string stamp = std::to_string(std::hash<std::string>{}(key));
  const std::string stamp_file = base + "/" + name + ".stamp";
  auto current = [&] { return std::filesystem::exists(stamp_file) && read_text(stamp_file) == stamp; };
  if (current()) return f;
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
