// make_exchanger: NCCL point-to-point when every process votes for it, MPI_Alltoallv otherwise.
#include "ckptdoc/compute/exchange.h"

#include <stdexcept>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/compute/reduction.h"
#include "ckptdoc/error.h"

#if defined(CKPTDOC_HAVE_CUDA) && defined(CKPTDOC_HAVE_NCCL)
#include "compute/cuda/nccl_exchanger.h"
#endif

namespace ckptdoc {
namespace {

class MpiExchanger final : public Exchanger {
 public:
  std::string name() const override {
    return mpi_size() > 1 ? "MPI (" + std::to_string(mpi_size()) + " processes)" : "single process";
  }
  void alltoallv(const float* send, const std::vector<size_t>& send_counts, float* recv,
                 const std::vector<size_t>& recv_counts) override {
    if (send_counts.size() != static_cast<size_t>(mpi_size()) || recv_counts.size() != send_counts.size())
      throw Error("", "alltoallv", "one count per process is needed");
    mpi_alltoallv(send, send_counts.data(), recv, recv_counts.data());
  }
};

}  // namespace

std::unique_ptr<Exchanger> make_exchanger(DeviceKind backend, [[maybe_unused]] int device,
                                          std::string* note) {
  if (vote_for_nccl(backend, note)) {
#if defined(CKPTDOC_HAVE_CUDA) && defined(CKPTDOC_HAVE_NCCL)
    try {
      return cuda::make_nccl_exchanger(
          device, mpi_rank(), mpi_size(),
          [](void* data, size_t bytes, int root) { mpi_broadcast(data, bytes, root); });
    } catch (const std::runtime_error& e) {
      throw Error(ErrorKind::Device, "", "NCCL communicator on device " + std::to_string(device), e.what());
    }
#endif
  }
  return std::make_unique<MpiExchanger>();
}

}  // namespace ckptdoc
