#pragma once
// The NCCL functions ckptdoc calls, resolved from the loaded library (see nccl_loader.h).
#include <nccl.h>

namespace ckptdoc::cuda {

struct NcclApi {
  decltype(&ncclGetVersion) GetVersion = nullptr;
  decltype(&ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&ncclCommInitRank) CommInitRank = nullptr;
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclAllReduce) AllReduce = nullptr;
  decltype(&ncclSend) Send = nullptr;
  decltype(&ncclRecv) Recv = nullptr;
  decltype(&ncclGroupStart) GroupStart = nullptr;
  decltype(&ncclGroupEnd) GroupEnd = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
};

// The loaded API, or nullptr with `reason` set. Loads once; thread-safe.
const NcclApi* nccl_api(std::string* reason);

}  // namespace ckptdoc::cuda
