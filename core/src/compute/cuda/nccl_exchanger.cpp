#include "compute/cuda/nccl_exchanger.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "compute/cuda/nccl_comm.h"

namespace ckptdoc::cuda {
namespace {

class NcclExchanger final : public Exchanger {
 public:
  NcclExchanger(int device, int rank, int size, const BroadcastFn& broadcast)
      : nccl_(device, rank, size, broadcast) {}

  std::string name() const override { return nccl_.describe(); }

  // The send buffer goes up in one copy, every pair's slice moves in one NCCL group (ncclSend/ncclRecv to
  // and from every peer, this process included), and the receive buffer comes back in one copy.
  void alltoallv(const float* send, const std::vector<size_t>& send_counts, float* recv,
                 const std::vector<size_t>& recv_counts) override {
    const size_t procs = static_cast<size_t>(nccl_.size());
    if (send_counts.size() != procs || recv_counts.size() != procs)
      throw Error("", "alltoallv", "one count per process is needed");
    size_t ns = 0, nr = 0;
    for (size_t p = 0; p < procs; ++p) {
      ns += send_counts[p];
      nr += recv_counts[p];
    }
    check_cuda_call(cudaSetDevice(nccl_.device()), "cudaSetDevice");
    cudaStream_t s = nccl_.stream();
    auto* dsend = static_cast<float*>(send_buf_.reserve(std::max<size_t>(ns, 1) * sizeof(float)));
    auto* drecv = static_cast<float*>(recv_buf_.reserve(std::max<size_t>(nr, 1) * sizeof(float)));
    if (ns)
      check_cuda_call(cudaMemcpyAsync(dsend, send, ns * sizeof(float), cudaMemcpyHostToDevice, s),
                      "cudaMemcpyAsync");
    const NcclApi& api = nccl_.api();
    nccl_.check(api.GroupStart(), "ncclGroupStart");
    size_t s_at = 0, r_at = 0;
    for (size_t p = 0; p < procs; ++p) {
      const int peer = static_cast<int>(p);
      if (send_counts[p])
        nccl_.check(api.Send(dsend + s_at, send_counts[p], ncclFloat32, peer, nccl_.comm(), s), "ncclSend");
      if (recv_counts[p])
        nccl_.check(api.Recv(drecv + r_at, recv_counts[p], ncclFloat32, peer, nccl_.comm(), s), "ncclRecv");
      s_at += send_counts[p];
      r_at += recv_counts[p];
    }
    nccl_.check(api.GroupEnd(), "ncclGroupEnd");
    if (nr)
      check_cuda_call(cudaMemcpyAsync(recv, drecv, nr * sizeof(float), cudaMemcpyDeviceToHost, s),
                      "cudaMemcpyAsync");
    check_cuda_call(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }

 private:
  NcclComm nccl_;
  DeviceScratch send_buf_, recv_buf_;
};

}  // namespace

std::unique_ptr<Exchanger> make_nccl_exchanger(int device, int rank, int size, const BroadcastFn& broadcast) {
  return std::make_unique<NcclExchanger>(device, rank, size, broadcast);
}

}  // namespace ckptdoc::cuda
