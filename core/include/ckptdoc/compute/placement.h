#pragma once
// Which device scans which dp rank's files when one process drives several GPUs: each rank file is read by
// one device only (its pages are mapped once, its copies stay on one PCIe link), and the bytes per device
// are balanced.
#include <cstdint>
#include <map>

namespace ckptdoc {

// dp rank -> device slot in [0, devices). Largest rank first onto the least loaded slot (ties: lower rank,
// lower slot), so the result depends only on the sizes. devices must be >= 1.
std::map<int, int> place_ranks(const std::map<int, uint64_t>& bytes_per_rank, int devices);

}  // namespace ckptdoc
