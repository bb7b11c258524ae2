#include <stdexcept>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"

#ifdef CKPTDOC_HAVE_CUDA
#include "compute/cuda/cuda_backend.h"
#endif

namespace ckptdoc {

DeviceKind parse_device(const std::string& s) {
  if (s == "auto") return DeviceKind::Auto;
  if (s == "cpu") return DeviceKind::Cpu;
  if (s == "cuda") return DeviceKind::Cuda;
  throw Error(ErrorKind::InvalidRequest, "", "device", expected_found("auto, cpu or cuda", "'" + s + "'"));
}

std::string device_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::Auto:
      return "auto";
    case DeviceKind::Cpu:
      return "cpu";
    case DeviceKind::Cuda:
      return "cuda";
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

int cuda_device_count() {
#ifdef CKPTDOC_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::unique_ptr<Backend> make_cuda_backend([[maybe_unused]] int device) {
#ifdef CKPTDOC_HAVE_CUDA
  try {
    return cuda::make_backend(device);
  } catch (const std::runtime_error& e) {
    throw Error(ErrorKind::Device, "", "CUDA device " + std::to_string(device), e.what());
  }
#else
  throw Error(ErrorKind::Device, "", "CUDA device " + std::to_string(device), "built without CUDA");
#endif
}

std::vector<int> devices_for_process(int local_rank, int local_size, int count) {
  std::vector<int> out;
  if (count <= 0 || local_size <= 0 || local_rank < 0) return out;
  if (local_size >= count) return {local_rank % count};
  for (int d = local_rank; d < count; d += local_size) out.push_back(d);
  return out;
}

std::unique_ptr<Backend> make_backend(DeviceKind kind, std::string* note) {
  if (kind == DeviceKind::Cpu) return make_cpu_backend();
  std::string why;
  const bool have = cuda_available(&why);
  if (!have) {
    if (kind == DeviceKind::Cuda)
      throw Error(ErrorKind::Device, "", "device cuda", "no usable CUDA device: " + why);
    if (note) *note = "no CUDA device: " + why + "; using CPU";
    return make_cpu_backend();
  }
#ifdef CKPTDOC_HAVE_CUDA
  try {
    return cuda::make_backend(
        devices_for_process(mpi_local_rank(), mpi_local_size(), cuda_device_count()).at(0));
  } catch (const std::runtime_error& e) {
    if (kind == DeviceKind::Cuda) throw Error(ErrorKind::Device, "", "device cuda", e.what());
    if (note) *note = std::string("CUDA device unusable: ") + e.what() + "; using CPU";
    return make_cpu_backend();
  }
#else
  return make_cpu_backend();
#endif
}

}  // namespace ckptdoc
