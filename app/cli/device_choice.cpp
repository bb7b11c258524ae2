#include "device_choice.h"

#include <cstdio>
#include <filesystem>

#include "ckptdoc/compute/distributed.h"

namespace ckptdoc::cli {

DeviceKind choose_device(const std::string& flag) {
  const DeviceKind kind = parse_device(flag);
  if (kind != DeviceKind::Auto) return kind;
  std::string reason;
  if (cuda_available(&reason)) return DeviceKind::Cuda;
#ifdef CKPTDOC_HAVE_CUDA
  // Said only where an NVIDIA driver is loaded: there the user may have expected the GPU. A machine without
  // one just runs on the CPU, as the report says.
  static bool said = false;
  std::error_code ec;
  if (!said && mpi_rank() == 0 && std::filesystem::exists("/proc/driver/nvidia/version", ec)) {
    std::fprintf(stderr, "ckptdoc: no usable CUDA device (%s); running on the CPU\n", reason.c_str());
    said = true;
  }
#endif
  return DeviceKind::Cpu;
}

}  // namespace ckptdoc::cli
