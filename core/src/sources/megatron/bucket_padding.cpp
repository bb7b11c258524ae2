// megatron-core's bucket padding and the DP size of a bucket's shards (see bucket_padding.h).
#include "bucket_padding.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

namespace ckptdoc::megatron {
namespace {

int64_t round_up(int64_t n, int64_t d) {
  return (n + d - 1) / d * d;
}

int rank_of(const std::string& file) {  // "__<rank>_<n>.distcp"
  if (file.rfind("__", 0) != 0 || file.size() < 3 || file[2] < '0' || file[2] > '9') return -1;
  return std::stoi(file.substr(2, 6));
}

}  // namespace

int64_t bucket_divisor(int64_t dp) {
  return std::lcm(dp, int64_t{128});
}

bool padded_by_megatron(int64_t padded, int64_t unpadded, int64_t dp) {
  if (dp < 1 || unpadded < 0) return false;
  const int64_t divisor = bucket_divisor(dp);
  return padded == round_up(unpadded, divisor) ||
         padded == round_up(unpadded, std::lcm(divisor, int64_t{1} << 16));
}

std::optional<int64_t> dp_from_shards(const dcp::Entry& e, int64_t padded) {
  if (e.size.size() != 1 || padded <= 0) return std::nullopt;
  int first = -1;
  std::set<int> ranks;
  for (const auto& c : e.chunks) {
    if (!c.item || c.offsets.size() != 1) return std::nullopt;
    const int rank = rank_of(c.item->file);
    if (rank < 0) return std::nullopt;
    ranks.insert(rank);
    if (c.offsets[0] == 0) first = rank;
  }
  if (first < 0 || ranks.size() < 2) return std::nullopt;
  int64_t shard = 0;
  for (const auto& c : e.chunks)
    if (rank_of(c.item->file) == first) shard = std::max(shard, c.offsets[0] + c.sizes[0]);
  if (shard <= 0 || padded % shard != 0) return std::nullopt;
  return padded / shard;
}

}  // namespace ckptdoc::megatron
