#include "compute/cuda/nccl_reduce.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ckptdoc::cuda {
namespace {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

}  // namespace

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

void nccl_allreduce_sum(std::vector<std::vector<uint64_t>>& counts, std::vector<std::vector<double>>& sums) {
  const int ndev = static_cast<int>(counts.size());
  if (ndev != static_cast<int>(sums.size())) throw std::invalid_argument("nccl_allreduce_sum: counts/sums GPU count differ");
  if (ndev <= 1) return;
  const size_t nc = counts[0].size(), ns = sums[0].size();
  for (int g = 0; g < ndev; ++g)
    if (counts[static_cast<size_t>(g)].size() != nc || sums[static_cast<size_t>(g)].size() != ns)
      throw std::invalid_argument("nccl_allreduce_sum: arrays of different lengths");
  int visible = 0;
  check_cuda(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  if (visible < ndev) throw std::runtime_error("nccl_allreduce_sum: " + std::to_string(ndev) + " GPUs asked, " +
                                               std::to_string(visible) + " visible");

  std::vector<ncclComm_t> comms(static_cast<size_t>(ndev));
  std::vector<int> devs(static_cast<size_t>(ndev));
  for (int g = 0; g < ndev; ++g) devs[static_cast<size_t>(g)] = g;
  check_nccl(ncclCommInitAll(comms.data(), ndev, devs.data()), "ncclCommInitAll");

  std::vector<uint64_t*> dc(static_cast<size_t>(ndev), nullptr);
  std::vector<double*> ds(static_cast<size_t>(ndev), nullptr);
  std::vector<cudaStream_t> streams(static_cast<size_t>(ndev), nullptr);
  auto cleanup = [&] {
    for (int g = 0; g < ndev; ++g) {
      const auto i = static_cast<size_t>(g);
      (void)cudaSetDevice(g);
      if (dc[i]) (void)cudaFree(dc[i]);
      if (ds[i]) (void)cudaFree(ds[i]);
      if (streams[i]) (void)cudaStreamDestroy(streams[i]);
      (void)ncclCommDestroy(comms[i]);
    }
  };
  try {
    for (int g = 0; g < ndev; ++g) {
      const auto i = static_cast<size_t>(g);
      check_cuda(cudaSetDevice(g), "cudaSetDevice");
      check_cuda(cudaStreamCreate(&streams[i]), "cudaStreamCreate");
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&dc[i]), std::max<size_t>(nc, 1) * sizeof(uint64_t)), "cudaMalloc");
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&ds[i]), std::max<size_t>(ns, 1) * sizeof(double)), "cudaMalloc");
      check_cuda(cudaMemcpy(dc[i], counts[i].data(), nc * sizeof(uint64_t), cudaMemcpyHostToDevice), "cudaMemcpy");
      check_cuda(cudaMemcpy(ds[i], sums[i].data(), ns * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int g = 0; g < ndev; ++g) {
      const auto i = static_cast<size_t>(g);
      if (nc) check_nccl(ncclAllReduce(dc[i], dc[i], nc, ncclUint64, ncclSum, comms[i], streams[i]), "ncclAllReduce");
      if (ns) check_nccl(ncclAllReduce(ds[i], ds[i], ns, ncclFloat64, ncclSum, comms[i], streams[i]), "ncclAllReduce");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    for (int g = 0; g < ndev; ++g) {
      const auto i = static_cast<size_t>(g);
      check_cuda(cudaSetDevice(g), "cudaSetDevice");
      check_cuda(cudaStreamSynchronize(streams[i]), "cudaStreamSynchronize");
      check_cuda(cudaMemcpy(counts[i].data(), dc[i], nc * sizeof(uint64_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
      check_cuda(cudaMemcpy(sums[i].data(), ds[i], ns * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
    }
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
}

}  // namespace ckptdoc::cuda
