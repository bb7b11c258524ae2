#include "ckptdoc/compute/placement.h"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "ckptdoc/error.h"

namespace ckptdoc {

std::map<int, int> place_ranks(const std::map<int, uint64_t>& bytes_per_rank, int devices) {
  if (devices < 1) throw Error("", "place_ranks", "no devices to place ranks on");
  std::vector<std::pair<uint64_t, int>> order;  // (bytes, rank)
  for (const auto& [rank, bytes] : bytes_per_rank) order.emplace_back(bytes, rank);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<uint64_t> load(static_cast<size_t>(devices), 0);
  std::map<int, int> out;
  for (const auto& [bytes, rank] : order) {
    const auto slot = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[slot] += bytes;
    out[rank] = static_cast<int>(slot);
  }
  return out;
}

}  // namespace ckptdoc
