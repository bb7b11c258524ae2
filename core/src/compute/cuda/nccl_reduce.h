#pragma once
// Sum all-reduce of flat count and sum arrays across the GPUs of one process (ncclCommInitAll), used to merge
// per-GPU statistics when one process drives several GPUs. Plain C++ header.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ckptdoc::cuda {

// counts[g] / sums[g] are GPU g's host arrays (all of equal length). Afterwards every array holds the
// element-wise total over all GPUs. Throws std::runtime_error with NCCL's or CUDA's reason on failure.
void nccl_allreduce_sum(std::vector<std::vector<uint64_t>>& counts, std::vector<std::vector<double>>& sums);

// NCCL's version as "major.minor.patch" (works without a GPU).
std::string nccl_version();

}  // namespace ckptdoc::cuda
