#pragma once
// NCCL loaded at run time with dlopen: a CUDA build of ckptdoc starts and runs on machines without
// libnccl (a laptop with a GPU, a container without NCCL) and uses NCCL where it is installed. Plain C++
// header; nccl.h's types stay in nccl_loader.cpp and nccl_reducer.cpp.
#include <string>

namespace ckptdoc::cuda {

// Whether libnccl.so.2 (or libnccl.so) loads and has every function ckptdoc calls; `reason` says why not.
bool nccl_loadable(std::string* reason = nullptr);
// NCCL's version as "major.minor.patch", or "not loadable: <reason>".
std::string nccl_version();

}  // namespace ckptdoc::cuda
