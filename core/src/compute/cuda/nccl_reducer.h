#pragma once
// The NCCL all-reduce of a distributed scan's packed statistics: one communicator over all processes (one
// GPU each), bootstrapped by broadcasting rank 0's unique id over the caller's channel (MPI). Plain C++.
#include <memory>

#include "ckptdoc/compute/reduction.h"

namespace ckptdoc::cuda {

// Collective: every process calls it with its own rank and the same size. Throws std::runtime_error with
// NCCL's or CUDA's reason (on every process when rank 0 cannot make the unique id).
std::unique_ptr<Reducer> make_nccl_reducer(int device, int rank, int size, const BroadcastFn& broadcast);

}  // namespace ckptdoc::cuda
