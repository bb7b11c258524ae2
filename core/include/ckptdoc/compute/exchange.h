#pragma once
// Moving float data between processes: a distributed re-partition sends each slice of an old partition to
// the process that writes the new partition holding it. Over NCCL when every process runs on CUDA (the
// same collective vote as the statistics reducer), over MPI on host memory otherwise.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/compute/backend.h"

namespace ckptdoc {

class Exchanger {
 public:
  virtual ~Exchanger() = default;
  virtual std::string name() const = 0;  // e.g. "MPI (2 processes)", "NCCL 2.27.7 over MPI (8 processes)"
  // Every process sends send_counts[p] floats to process p (back to back in `send`, in process order) and
  // receives recv_counts[p] floats from p into `recv`, in process order. Collective; the counts must match
  // pairwise (send_counts[q] on p == recv_counts[p] on q).
  virtual void alltoallv(const float* send, const std::vector<size_t>& send_counts, float* recv,
                         const std::vector<size_t>& recv_counts) = 0;
};

// Collective under MPI: every process calls it. `device` is this process's CUDA device when `backend` is
// Cuda. A single process gets a local copy. `note` says why a CUDA process does not use NCCL.
std::unique_ptr<Exchanger> make_exchanger(DeviceKind backend, int device, std::string* note = nullptr);

}  // namespace ckptdoc
