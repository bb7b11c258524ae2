// exchange_pieces (see the header): ZeRO-1/2 and ZeRO-3 partitions follow DeepSpeed's rules
// (deepspeed::zero3_partition_numel), so the plan lives with DeepSpeed's source.
#include "ckptdoc/sources/checkpoint/exchange_plan.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/writer.h"

namespace ckptdoc::repair {

std::vector<Holding> param_holdings(const model::GroupLayout& g, const model::ParamEntry& p, bool zero3) {
  std::vector<Holding> out;
  const int dp = static_cast<int>(g.partitions.size());
  if (p.numel <= 0 || dp <= 0) return out;
  if (zero3) {
    const int64_t part = deepspeed::zero3_partition_numel(p.numel, dp);
    for (int r = 0; r < dp; ++r) {
      const int64_t first = static_cast<int64_t>(r) * part;
      if (first >= p.numel) break;
      out.push_back({r, first, std::min(part, p.numel - first), p.offset});
    }
    return out;
  }
  const int64_t P = g.partition_numel;
  if (P <= 0) throw Error(ErrorKind::Corrupt, "", "group " + std::to_string(g.index), "partition length 0");
  for (int64_t at = p.offset; at < p.offset + p.numel;) {
    const int64_t r = at / P;
    const int64_t stop = std::min(p.offset + p.numel, (r + 1) * P);
    out.push_back({static_cast<int>(r), at - p.offset, stop - at, at - r * P});
    at = stop;
  }
  return out;
}

std::vector<Piece> exchange_pieces(const std::vector<model::GroupLayout>& old_groups,
                                   const std::vector<model::GroupLayout>& new_groups, bool zero3,
                                   int64_t max_len) {
  std::map<std::string, std::pair<const model::GroupLayout*, const model::ParamEntry*>> old_place;
  for (const auto& g : old_groups)
    for (const auto& p : g.params) old_place[p.name] = {&g, &p};
  std::vector<Piece> pieces;
  for (size_t gi = 0; gi < new_groups.size(); ++gi) {
    const auto& ng = new_groups[gi];
    const size_t group_start = pieces.size();
    for (const auto& np : ng.params) {
      const auto it = old_place.find(np.name);
      if (it == old_place.end() || it->second.second->numel != np.numel)
        throw Error(ErrorKind::Inconsistent, "", "param '" + np.name + "'",
                    "not in the old layout with the same number of elements");
      const auto olds = param_holdings(*it->second.first, *it->second.second, zero3);
      const auto news = param_holdings(ng, np, zero3);
      // Both lists cover [0, numel) in order: walk them together.
      size_t i = 0, j = 0;
      for (int64_t at = 0; at < np.numel;) {
        while (olds[i].first + olds[i].len <= at) ++i;
        while (news[j].first + news[j].len <= at) ++j;
        const int64_t stop = std::min({olds[i].first + olds[i].len, news[j].first + news[j].len, np.numel});
        for (int64_t s = at; s < stop; s += max_len) {
          Piece pc;
          pc.param = np.name;
          pc.first = s;
          pc.len = std::min(max_len, stop - s);
          pc.old_rank = olds[i].rank;
          pc.new_rank = news[j].rank;
          pc.new_group = static_cast<int>(gi);
          pc.new_offset = news[j].offset + (s - news[j].first);
          pieces.push_back(std::move(pc));
        }
        at = stop;
      }
    }
    std::stable_sort(pieces.begin() + static_cast<std::ptrdiff_t>(group_start), pieces.end(),
                     [](const Piece& a, const Piece& b) {
                       return std::tie(a.new_rank, a.new_offset) < std::tie(b.new_rank, b.new_offset);
                     });
  }
  return pieces;
}

}  // namespace ckptdoc::repair
