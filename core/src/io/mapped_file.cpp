#include "ckptdoc/io/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/io/fault_injection.h"

namespace ckptdoc {

// ---------------------------------------------------------------------------------------------------------
// SIGBUS guard: a registry of live mappings that a signal handler can read without locks.

namespace {

constexpr int kGuardSlots =
    1 << 16;  // mappings guarded at once; more are mapped unguarded (see register_map)

struct GuardSlot {
  std::atomic<uintptr_t> begin{0}, end{0};  // [begin, end) of the mapping; begin 0 = free
  std::atomic<int> changed{0};
  const MappedFile* owner = nullptr;  // read under g_registry_mutex only
};
std::atomic<uint64_t> g_changes{0};  // lock-free, so the handler may bump it
GuardSlot g_slots[kGuardSlots];
std::atomic<int> g_high_water{0};  // slots [0, high_water) may be in use
std::mutex g_registry_mutex;       // registration only; the handler never locks
// Files found changed whose mapping is already gone (a universal param file is mapped only while read): the
// error raised after the scan must still name them. Guarded by g_registry_mutex.
struct DroppedChange {
  std::string path;
  uint64_t size_when_opened = 0;
};
std::vector<DroppedChange> g_dropped_changes;
std::function<void(const std::string&)> g_touch_hook;  // test scaffolding, see set_file_touch_hook
struct sigaction g_previous {};
std::once_flag g_install_once;

void chain_to_previous(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_IGN) return;
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: let the faulting access run again with no handler, so the process dies as it would have.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const int n = g_high_water.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    GuardSlot& s = g_slots[i];
    const uintptr_t b = s.begin.load(std::memory_order_acquire), e = s.end.load(std::memory_order_acquire);
    if (b == 0 || addr < b || addr >= e) continue;
    // The file shrank under its mapping: zero pages from the faulting page to the end of the mapping (mmap is
    // a plain system call, safe here), and the reader's check_unchanged() reports it.
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t from = addr / page * page;
    void* p = mmap(reinterpret_cast<void*>(from), e - from, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) break;
    s.changed.store(1, std::memory_order_release);
    g_changes.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  chain_to_previous(sig, info, context);
}

void install_guard() {
  std::call_once(g_install_once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
}

int register_map(const MappedFile* owner, const uint8_t* data, uint64_t size) {
  install_guard();
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  const int n = g_high_water.load();
  int slot = -1;
  for (int i = 0; i < n && slot < 0; ++i)
    if (g_slots[i].begin.load() == 0) slot = i;
  if (slot < 0) {
    if (n >= kGuardSlots) return -1;  // unguarded: as before, a shrinking file would end the process
    slot = n;
    g_high_water.store(n + 1, std::memory_order_release);
  }
  GuardSlot& s = g_slots[slot];
  s.changed.store(0);
  s.owner = owner;
  s.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_release);
  s.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
  return slot;
}

void unregister_map(int slot, const std::string& path, uint64_t size) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (g_slots[slot].changed.load(std::memory_order_acquire)) {
    if (g_dropped_changes.size() >= 64)
      g_dropped_changes.erase(g_dropped_changes.begin());  // the newest count
    g_dropped_changes.push_back({path, size});
  }
  g_slots[slot].begin.store(0, std::memory_order_release);
  g_slots[slot].end.store(0, std::memory_order_release);
  g_slots[slot].owner = nullptr;
}

[[noreturn]] void throw_file_changed(const std::string& path, uint64_t size_when_opened) {
  struct stat st {};
  const std::string now =
      ::stat(path.c_str(), &st) == 0 ? std::to_string(st.st_size) + " bytes now" : "gone now";
  throw Error(
      ErrorKind::Io, path, "",
      "changed while being read: it had " + std::to_string(size_when_opened) + " bytes when opened and is " +
          now +
          " (a save still running, or another machine writing it?); nothing read from it is used. Read it "
          "again once it is complete");
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// MappedFile

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    throw Error(e == ENOENT || e == ENOTDIR ? ErrorKind::NotFound : ErrorKind::Io, path, "",
                std::string("cannot open: ") + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(ErrorKind::Io, path, "", std::string("cannot stat: ") + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::Unsupported, path, "", "is a directory, expected a file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  f->mapped_ = true;
  f->device_ = static_cast<uint64_t>(st.st_dev);
  f->inode_ = static_cast<uint64_t>(st.st_ino);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw Error(ErrorKind::Io, path, "", std::string("cannot map: ") + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
    f->guard_slot_ = register_map(f.get(), f->data_, f->size_);
  }
  ::close(fd);
  if (g_touch_hook) g_touch_hook(path);
  return f;
}

std::shared_ptr<const MappedFile> MappedFile::from_memory(const std::string& name,
                                                          std::vector<uint8_t> bytes) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = name;
  f->owned_ = std::move(bytes);
  f->size_ = f->owned_.size();
  f->data_ = f->owned_.empty() ? nullptr : f->owned_.data();
  return f;
}

std::shared_ptr<const MappedFile> MappedFile::view(std::shared_ptr<const MappedFile> whole, uint64_t offset,
                                                   uint64_t length, const std::string& name) {
  const std::span<const uint8_t> bytes = whole->slice(offset, length, name.c_str());
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = name;
  f->size_ = length;
  f->data_ = bytes.empty() ? nullptr : bytes.data();
  f->whole_ = std::move(whole);
  return f;
}

MappedFile::~MappedFile() {
  unregister_map(guard_slot_, path_, size_);
  if (data_ && owned_.empty() && !whole_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

uint64_t MappedFile::change_count() {
  return g_changes.load(std::memory_order_acquire);
}

void MappedFile::throw_changed(const std::string& while_doing) {
  std::unique_lock<std::mutex> lock(g_registry_mutex);
  for (int i = 0, n = g_high_water.load(); i < n; ++i)
    if (g_slots[i].begin.load() && g_slots[i].changed.load() && g_slots[i].owner) {
      const MappedFile* f = g_slots[i].owner;
      lock.unlock();  // f stays alive: the caller still holds the file it was reading
      f->check_unchanged();
      lock.lock();
      break;
    }
  if (!g_dropped_changes.empty()) {
    const DroppedChange d = g_dropped_changes.back();
    lock.unlock();
    throw_file_changed(d.path, d.size_when_opened);
  }
  throw Error(ErrorKind::Io, "", while_doing,
              "a file changed while being read (it shrank under its memory map); nothing was written");
}

bool MappedFile::changed() const {
  if (whole_) return whole_->changed();
  return guard_slot_ >= 0 && g_slots[guard_slot_].changed.load(std::memory_order_acquire) != 0;
}

void MappedFile::check_unchanged() const {
  if (changed()) throw_file_changed(path_, size_);
}

void set_file_touch_hook(std::function<void(const std::string& path)> hook) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_touch_hook = std::move(hook);
}

std::span<const uint8_t> MappedFile::slice(uint64_t offset, uint64_t length, const char* what) const {
  if (offset > size_ || length > size_ - offset) {
    throw Error(ErrorKind::Truncated, path_, at_offset(offset),
                std::string(what) + " of " + std::to_string(length) +
                    " bytes runs past the end of the file (" + std::to_string(size_) + " bytes)");
  }
  if (g_touch_hook && mapped_) g_touch_hook(path_);
  return {data_ + offset, static_cast<size_t>(length)};
}

namespace {
void advise(const uint8_t* base, uint64_t size, uint64_t offset, uint64_t length, int advice) {
  if (!base || offset >= size) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t end = std::min(size, offset + length);
  ::madvise(const_cast<uint8_t*>(base) + start, end - start, advice);
}
}  // namespace

// Only for real mappings: MADV_DONTNEED on the heap bytes of from_memory() would zero them.
void MappedFile::will_need(uint64_t offset, uint64_t length) const {
  if (mapped_) advise(data_, size_, offset, length, MADV_WILLNEED);
}
void MappedFile::dont_need(uint64_t offset, uint64_t length) const {
  if (mapped_) advise(data_, size_, offset, length, MADV_DONTNEED);
}

int MappedFile::reopen() const {
  if (!mapped_) return -1;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_dev) != device_ ||
      static_cast<uint64_t>(st.st_ino) != inode_ || static_cast<uint64_t>(st.st_size) < size_) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace ckptdoc
