#pragma once
// --device for the CLI: "auto" is settled here, once per process, so that a CUDA build finding no usable GPU
// says so one time on stderr (and why) instead of silently running on the CPU.
#include <string>

#include "ckptdoc/compute/backend.h"

namespace ckptdoc::cli {

// "cpu" and "cuda" as given; "auto" becomes Cuda when a device is usable, else Cpu with one stderr line
// (only in builds with CUDA support, and only on MPI rank 0). Throws ckptdoc::Error for other names.
DeviceKind choose_device(const std::string& flag);

}  // namespace ckptdoc::cli
