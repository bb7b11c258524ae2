#include "compute/cuda/nccl_reducer.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "compute/cuda/nccl_api.h"
#include "compute/cuda/nccl_loader.h"

namespace ckptdoc::cuda {
namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
}

// What rank 0 broadcasts: whether it could make the id, so the others fail with it instead of hanging.
struct Bootstrap {
  int ok = 0;
  ncclUniqueId id{};
};

class NcclReducer final : public Reducer {
 public:
  NcclReducer(int device, int rank, int size, const BroadcastFn& broadcast) : dev_(device), size_(size) {
    std::string why;
    api_ = nccl_api(&why);
    Bootstrap b;
    if (rank == 0 && api_) b.ok = api_->GetUniqueId(&b.id) == ncclSuccess ? 1 : 0;
    broadcast(&b, sizeof b, 0);
    if (!api_) throw std::runtime_error("NCCL not loadable: " + why);
    if (!b.ok) throw std::runtime_error("rank 0 could not make an NCCL unique id");
    check_cuda(cudaSetDevice(dev_), "cudaSetDevice");
    check(api_->CommInitRank(&comm_, size, b.id, rank), "ncclCommInitRank");
    check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
    version_ = nccl_version();
  }
  ~NcclReducer() override {
    (void)cudaSetDevice(dev_);
    if (buffer_) (void)cudaFree(buffer_);
    if (stream_) (void)cudaStreamDestroy(stream_);
    if (comm_) (void)api_->CommDestroy(comm_);
  }
  NcclReducer(const NcclReducer&) = delete;
  NcclReducer& operator=(const NcclReducer&) = delete;

  std::string name() const override {
    return "NCCL " + version_ + " over MPI (" + std::to_string(size_) + " processes)";
  }

  // The four arrays go to the device back to back, are reduced in one NCCL group and come back.
  void allreduce(ReductionArrays& a) override {
    check_cuda(cudaSetDevice(dev_), "cudaSetDevice");
    const size_t nc = a.counts.size(), ns = a.sums.size(), nmin = a.mins.size(), nmax = a.maxs.size();
    const size_t bytes = nc * sizeof(uint64_t) + (ns + nmin + nmax) * sizeof(double);
    if (bytes == 0) return;
    reserve(bytes);
    auto* counts = static_cast<uint64_t*>(buffer_);
    auto* sums = reinterpret_cast<double*>(counts + nc);
    double* mins = sums + ns;
    double* maxs = mins + nmin;
    upload(counts, a.counts);
    upload(sums, a.sums);
    upload(mins, a.mins);
    upload(maxs, a.maxs);
    check(api_->GroupStart(), "ncclGroupStart");
    if (nc) check(api_->AllReduce(counts, counts, nc, ncclUint64, ncclSum, comm_, stream_), "ncclAllReduce(counts)");
    if (ns) check(api_->AllReduce(sums, sums, ns, ncclFloat64, ncclSum, comm_, stream_), "ncclAllReduce(sums)");
    if (nmin) check(api_->AllReduce(mins, mins, nmin, ncclFloat64, ncclMin, comm_, stream_), "ncclAllReduce(mins)");
    if (nmax) check(api_->AllReduce(maxs, maxs, nmax, ncclFloat64, ncclMax, comm_, stream_), "ncclAllReduce(maxs)");
    check(api_->GroupEnd(), "ncclGroupEnd");
    download(a.counts, counts);
    download(a.sums, sums);
    download(a.mins, mins);
    download(a.maxs, maxs);
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  void check(ncclResult_t r, const char* what) const {
    if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + api_->GetErrorString(r));
  }
  void reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    if (buffer_) check_cuda(cudaFree(buffer_), "cudaFree");
    buffer_ = nullptr;
    check_cuda(cudaMalloc(&buffer_, bytes), "cudaMalloc");
    capacity_ = bytes;
  }
  template <class T>
  void upload(T* device, const std::vector<T>& host) {
    if (!host.empty())
      check_cuda(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream_),
                 "cudaMemcpyAsync");
  }
  template <class T>
  void download(std::vector<T>& host, const T* device) {
    if (!host.empty())
      check_cuda(cudaMemcpyAsync(host.data(), device, host.size() * sizeof(T), cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync");
  }

  int dev_, size_;
  const NcclApi* api_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* buffer_ = nullptr;
  size_t capacity_ = 0;
  std::string version_;
};

}  // namespace

std::unique_ptr<Reducer> make_nccl_reducer(int device, int rank, int size, const BroadcastFn& broadcast) {
  return std::make_unique<NcclReducer>(device, rank, size, broadcast);
}

}  // namespace ckptdoc::cuda
