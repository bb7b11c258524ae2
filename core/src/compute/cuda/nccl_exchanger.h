#pragma once
// The NCCL all-to-all of a distributed re-partition: grouped point-to-point sends and receives between the
// processes' GPUs, staged through device buffers. Plain C++ header.
#include <memory>

#include "ckptdoc/compute/exchange.h"
#include "ckptdoc/compute/reduction.h"

namespace ckptdoc::cuda {

// Collective, as make_nccl_reducer.
std::unique_ptr<Exchanger> make_nccl_exchanger(int device, int rank, int size, const BroadcastFn& broadcast);

}  // namespace ckptdoc::cuda
