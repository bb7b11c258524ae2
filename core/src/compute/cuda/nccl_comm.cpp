#include "compute/cuda/nccl_comm.h"

#include <stdexcept>

#include "ckptdoc/error.h"
#include "compute/cuda/nccl_loader.h"

namespace ckptdoc::cuda {
namespace {

// What rank 0 broadcasts: whether it could make the id, so the others fail with it instead of hanging.
struct Bootstrap {
  int ok = 0;
  ncclUniqueId id{};
};

}  // namespace

void check_cuda_call(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(ErrorKind::Device, "", what, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
  }
}

NcclComm::NcclComm(int device, int rank, int size, const BroadcastFn& broadcast) : dev_(device), size_(size) {
  std::string why;
  api_ = nccl_api(&why);
  Bootstrap b;
  if (rank == 0 && api_) b.ok = api_->GetUniqueId(&b.id) == ncclSuccess ? 1 : 0;
  broadcast(&b, sizeof b, 0);
  if (!api_) throw Error(ErrorKind::Device, "", "NCCL", "not loadable: " + why);
  if (!b.ok) throw Error(ErrorKind::Device, "", "NCCL", "rank 0 could not make a unique id");
  check_cuda_call(cudaSetDevice(dev_), "cudaSetDevice");
  check(api_->CommInitRank(&comm_, size, b.id, rank), "ncclCommInitRank");
  check_cuda_call(cudaStreamCreate(&stream_), "cudaStreamCreate");
  version_ = nccl_version();
}

NcclComm::~NcclComm() {
  (void)cudaSetDevice(dev_);
  if (stream_) (void)cudaStreamDestroy(stream_);
  if (comm_) (void)api_->CommDestroy(comm_);
}

void NcclComm::check(ncclResult_t r, const char* what) const {
  if (r != ncclSuccess) throw Error(ErrorKind::Device, "", what, api_->GetErrorString(r));
}

std::string NcclComm::describe() const {
  return "NCCL " + version_ + " over MPI (" + std::to_string(size_) + " processes)";
}

DeviceScratch::~DeviceScratch() {
  if (ptr_) (void)cudaFree(ptr_);
}

void* DeviceScratch::reserve(size_t bytes) {
  if (bytes <= capacity_) return ptr_;
  if (ptr_) check_cuda_call(cudaFree(ptr_), "cudaFree");
  ptr_ = nullptr;
  capacity_ = 0;
  check_cuda_call(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  capacity_ = bytes;
  return ptr_;
}

}  // namespace ckptdoc::cuda
