#include "compute/cuda/nccl_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "compute/cuda/nccl_api.h"

namespace ckptdoc::cuda {
namespace {

struct Loaded {
  NcclApi api;
  bool ok = false;
  std::string reason;
};

template <class F>
bool resolve(void* lib, const char* name, F& slot, std::string& reason) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  if (!slot) reason = std::string("libnccl has no ") + name;
  return slot != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = nullptr;
  std::string tried;
  for (const char* name : {"libnccl.so.2", "libnccl.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    const char* err = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (err ? err : name);
  }
  if (!lib) {
    l.reason = tried;
    return l;
  }
  // The library stays loaded for the life of the process: NCCL keeps threads that outlive any comm.
  NcclApi& a = l.api;
  l.ok = resolve(lib, "ncclGetVersion", a.GetVersion, l.reason) &&
         resolve(lib, "ncclGetUniqueId", a.GetUniqueId, l.reason) &&
         resolve(lib, "ncclCommInitRank", a.CommInitRank, l.reason) &&
         resolve(lib, "ncclCommDestroy", a.CommDestroy, l.reason) &&
         resolve(lib, "ncclAllReduce", a.AllReduce, l.reason) &&
         resolve(lib, "ncclSend", a.Send, l.reason) &&  // NCCL >= 2.7
         resolve(lib, "ncclRecv", a.Recv, l.reason) &&
         resolve(lib, "ncclGroupStart", a.GroupStart, l.reason) &&
         resolve(lib, "ncclGroupEnd", a.GroupEnd, l.reason) &&
         resolve(lib, "ncclGetErrorString", a.GetErrorString, l.reason);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const NcclApi* nccl_api(std::string* reason) {
  const Loaded& l = loaded();
  if (!l.ok && reason) *reason = l.reason;
  return l.ok ? &l.api : nullptr;
}

bool nccl_loadable(std::string* reason) {
  return nccl_api(reason) != nullptr;
}

std::string nccl_version() {
  std::string why;
  const NcclApi* a = nccl_api(&why);
  if (!a) return "not loadable: " + why;
  int v = 0;
  if (a->GetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

}  // namespace ckptdoc::cuda
