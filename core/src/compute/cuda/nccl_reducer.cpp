#include "compute/cuda/nccl_reducer.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "compute/cuda/nccl_comm.h"

namespace ckptdoc::cuda {
namespace {

class NcclReducer final : public Reducer {
 public:
  NcclReducer(int device, int rank, int size, const BroadcastFn& broadcast)
      : nccl_(device, rank, size, broadcast) {}

  std::string name() const override { return nccl_.describe(); }

  // The four arrays go to the device back to back, are reduced in one NCCL group and come back.
  void allreduce(ReductionArrays& a) override {
    check_cuda_call(cudaSetDevice(nccl_.device()), "cudaSetDevice");
    const size_t nc = a.counts.size(), ns = a.sums.size(), nmin = a.mins.size(), nmax = a.maxs.size();
    const size_t bytes = nc * sizeof(uint64_t) + (ns + nmin + nmax) * sizeof(double);
    if (bytes == 0) return;
    auto* counts = static_cast<uint64_t*>(buffer_.reserve(bytes));
    auto* sums = reinterpret_cast<double*>(counts + nc);
    double* mins = sums + ns;
    double* maxs = mins + nmin;
    upload(counts, a.counts);
    upload(sums, a.sums);
    upload(mins, a.mins);
    upload(maxs, a.maxs);
    const NcclApi& api = nccl_.api();
    ncclComm_t comm = nccl_.comm();
    cudaStream_t s = nccl_.stream();
    nccl_.check(api.GroupStart(), "ncclGroupStart");
    if (nc)
      nccl_.check(api.AllReduce(counts, counts, nc, ncclUint64, ncclSum, comm, s), "ncclAllReduce(counts)");
    if (ns) nccl_.check(api.AllReduce(sums, sums, ns, ncclFloat64, ncclSum, comm, s), "ncclAllReduce(sums)");
    if (nmin)
      nccl_.check(api.AllReduce(mins, mins, nmin, ncclFloat64, ncclMin, comm, s), "ncclAllReduce(mins)");
    if (nmax)
      nccl_.check(api.AllReduce(maxs, maxs, nmax, ncclFloat64, ncclMax, comm, s), "ncclAllReduce(maxs)");
    nccl_.check(api.GroupEnd(), "ncclGroupEnd");
    download(a.counts, counts);
    download(a.sums, sums);
    download(a.mins, mins);
    download(a.maxs, maxs);
    check_cuda_call(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }

 private:
  template <class T>
  void upload(T* device, const std::vector<T>& host) {
    if (!host.empty())
      check_cuda_call(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice,
                                      nccl_.stream()),
                      "cudaMemcpyAsync");
  }
  template <class T>
  void download(std::vector<T>& host, const T* device) {
    if (!host.empty())
      check_cuda_call(cudaMemcpyAsync(host.data(), device, host.size() * sizeof(T), cudaMemcpyDeviceToHost,
                                      nccl_.stream()),
                      "cudaMemcpyAsync");
  }

  NcclComm nccl_;
  DeviceScratch buffer_;
};

}  // namespace

std::unique_ptr<Reducer> make_nccl_reducer(int device, int rank, int size, const BroadcastFn& broadcast) {
  return std::make_unique<NcclReducer>(device, rank, size, broadcast);
}

}  // namespace ckptdoc::cuda
