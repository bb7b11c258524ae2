#pragma once
// One NCCL communicator over all MPI processes (one GPU each) and a stream on this process's device,
// bootstrapped by broadcasting rank 0's unique id over the caller's channel. Shared by the statistics
// reducer and the re-partition exchanger; includes nccl.h, so only nccl_*.cpp files include it.
#include <cuda_runtime_api.h>

#include <string>

#include "ckptdoc/compute/reduction.h"
#include "compute/cuda/nccl_api.h"

namespace ckptdoc::cuda {

// Throws std::runtime_error naming `what` with CUDA's reason.
void check_cuda_call(cudaError_t e, const char* what);

class NcclComm {
 public:
  // Collective: every process calls it with its own rank and the same size. Throws std::runtime_error with
  // NCCL's or CUDA's reason (on every process when rank 0 cannot make the unique id).
  NcclComm(int device, int rank, int size, const BroadcastFn& broadcast);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  void check(ncclResult_t r, const char* what) const;  // throws std::runtime_error with NCCL's reason
  const NcclApi& api() const { return *api_; }
  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  int device() const { return dev_; }
  int size() const { return size_; }
  std::string describe() const;  // "NCCL 2.27.7 over MPI (8 processes)"

 private:
  int dev_, size_;
  const NcclApi* api_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::string version_;
};

// A device buffer that grows on demand (never shrinks); freed with the owner.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  void* reserve(size_t bytes);

 private:
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace ckptdoc::cuda
