#include <stdexcept>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/error.h"

#ifdef CKPTDOC_HAVE_CUDA
#include "compute/cuda/cuda_backend.h"
#endif

namespace ckptdoc {

DeviceKind parse_device(const std::string& s) {
  if (s == "auto") return DeviceKind::Auto;
  if (s == "cpu") return DeviceKind::Cpu;
  if (s == "cuda") return DeviceKind::Cuda;
  throw Error("", "device", expected_found("auto, cpu or cuda", "'" + s + "'"));
}

std::string device_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::Auto: return "auto";
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
  }
  return "unknown";
}

bool cuda_available(std::string* reason) {
#ifdef CKPTDOC_HAVE_CUDA
  std::string why;
  const bool ok = cuda::probe(&why);
  if (!ok && reason) *reason = why;
  return ok;
#else
  if (reason) *reason = "built without CUDA";
  return false;
#endif
}

std::unique_ptr<Backend> make_backend(DeviceKind kind, std::string* note) {
  if (kind == DeviceKind::Cpu) return make_cpu_backend();
  std::string why;
  const bool have = cuda_available(&why);
  if (!have) {
    if (kind == DeviceKind::Cuda) throw Error("", "device cuda", "no usable CUDA device: " + why);
    if (note) *note = "no CUDA device: " + why + "; using CPU";
    return make_cpu_backend();
  }
#ifdef CKPTDOC_HAVE_CUDA
  try {
    return cuda::make_backend(0);
  } catch (const std::runtime_error& e) {
    if (kind == DeviceKind::Cuda) throw Error("", "device cuda", e.what());
    if (note) *note = std::string("CUDA device unusable: ") + e.what() + "; using CPU";
    return make_cpu_backend();
  }
#else
  return make_cpu_backend();
#endif
}

}  // namespace ckptdoc
