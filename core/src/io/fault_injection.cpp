#include "ckptdoc/io/fault_injection.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

namespace ckptdoc {

std::optional<FaultPlan> FaultPlan::parse(const std::string& spec) {
  FaultPlan p;
  const auto at = spec.find('@');
  if (at == std::string::npos) return std::nullopt;
  const std::string action = spec.substr(0, at);
  if (action == "kill")
    p.action = Action::Kill;
  else if (action == "fail" || action == "short")
    p.action = Action::Fail;
  else
    return std::nullopt;
  p.short_write = action == "short";
  std::string rest = spec.substr(at + 1);
  std::string parts[3];
  for (int i = 0; i < 3; ++i) {
    const auto c = rest.find(':');
    parts[i] = rest.substr(0, c);
    if (c == std::string::npos) break;
    rest = rest.substr(c + 1);
  }
  char* end = nullptr;
  p.at_call = std::strtoull(parts[0].c_str(), &end, 10);
  if (p.at_call == 0 || (end && *end)) return std::nullopt;
  if (!parts[1].empty()) p.calls = parts[1];
  static const std::map<std::string, int> kErrors = {
      {"ENOSPC", ENOSPC}, {"EIO", EIO}, {"EACCES", EACCES}, {"EROFS", EROFS}, {"EDQUOT", EDQUOT}};
  if (!parts[2].empty()) {
    auto it = kErrors.find(parts[2]);
    if (it == kErrors.end()) return std::nullopt;
    p.error = it->second;
  }
  return p;
}

int FaultyIo::inject(const char* call) {
  if (fired_.load()) return 0;
  if (plan_.calls != "any" && plan_.calls != call) return 0;
  if (count_.fetch_add(1) + 1 != plan_.at_call) return 0;
  fired_.store(true);
  if (plan_.action == FaultPlan::Action::Kill) ::_exit(137);  // as if SIGKILLed: no cleanup at all
  return plan_.error;
}

int FaultyIo::open_write(const std::string& path, int* fd) {
  if (const int e = inject("open")) return e;
  return inner_.open_write(path, fd);
}
int FaultyIo::write(int fd, const uint8_t* data, size_t size, size_t* written) {
  if (plan_.short_write && !fired_.load() && (plan_.calls == "any" || plan_.calls == "write") &&
      count_.load() + 1 == plan_.at_call && size > 1) {
    count_.fetch_add(1);
    plan_.at_call += 1;  // the next write fails
    return inner_.write(fd, data, size / 2, written);
  }
  if (const int e = inject("write")) {
    *written = 0;
    return e;
  }
  return inner_.write(fd, data, size, written);
}
int FaultyIo::fsync(int fd) {
  if (const int e = inject("fsync")) return e;
  return inner_.fsync(fd);
}
int FaultyIo::close(int fd) {
  if (const int e = inject("close")) {
    inner_.close(fd);
    return e;
  }
  return inner_.close(fd);
}
int FaultyIo::rename(const std::string& from, const std::string& to) {
  if (const int e = inject("rename")) return e;
  return inner_.rename(from, to);
}
int FaultyIo::rename_noreplace(const std::string& from, const std::string& to) {
  if (const int e = inject("rename")) return e;
  return inner_.rename_noreplace(from, to);
}
int FaultyIo::unlink(const std::string& path) {
  if (const int e = inject("unlink")) return e;
  return inner_.unlink(path);
}
int FaultyIo::mkdir(const std::string& path) {
  if (const int e = inject("mkdir")) return e;
  return inner_.mkdir(path);
}
int FaultyIo::fsync_dir(const std::string& path) {
  if (const int e = inject("fsync_dir")) return e;
  return inner_.fsync_dir(path);
}

std::string install_fault_injection_from_env() {
  const char* spec = std::getenv("CKPTDOC_FAULT");
  if (!spec || !*spec) return "";
  auto plan = FaultPlan::parse(spec);
  if (!plan) return std::string("ignored malformed CKPTDOC_FAULT=") + spec;
  static std::unique_ptr<FaultyIo> io;
  static std::unique_ptr<ScopedFileIo> scope;
  io = std::make_unique<FaultyIo>(posix_io(), *plan);
  scope = std::make_unique<ScopedFileIo>(*io);
  return std::string("fault injection active: ") + spec;
}

std::string install_file_cut_from_env() {
  const char* spec = std::getenv("CKPTDOC_CUT_FILE");
  if (!spec || !*spec) return "";
  const std::string text = spec;
  const auto last = text.rfind(':');
  const auto mid = last == std::string::npos || last == 0 ? std::string::npos : text.rfind(':', last - 1);
  if (mid == std::string::npos || mid == 0)
    return "ignored malformed CKPTDOC_CUT_FILE=" + text + " (NAME:BYTES:N)";
  const std::string name = text.substr(0, mid);
  char* end = nullptr;
  const uint64_t bytes = std::strtoull(text.c_str() + mid + 1, &end, 10);
  const uint64_t nth = std::strtoull(text.c_str() + last + 1, nullptr, 10);
  if (end != text.c_str() + last || nth == 0)
    return "ignored malformed CKPTDOC_CUT_FILE=" + text + " (NAME:BYTES:N, N >= 1)";
  auto seen = std::make_shared<std::atomic<uint64_t>>(0);
  set_file_touch_hook([name, bytes, nth, seen](const std::string& path) {
    if (path.size() < name.size() || path.compare(path.size() - name.size(), name.size(), name) != 0) return;
    if (seen->fetch_add(1) + 1 != nth) return;
    std::filesystem::resize_file(path, bytes);
    std::fprintf(stderr, "ckptdoc: test hook: cut %s to %llu bytes at its touch %llu\n", path.c_str(),
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(nth));
  });
  return "file cut active: " + text;
}

}  // namespace ckptdoc
