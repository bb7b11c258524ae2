// ZeRO-3 sub-group layout (§5.3): every param is padded to a multiple of dp and rank r holds slice r of each.
#include <algorithm>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/layout.h"

namespace ckptdoc::deepspeed {

GroupLayout layout_zero3(int index, std::vector<ParamEntry> params, int dp) {
  if (dp < 1)
    throw Error(ErrorKind::InvalidRequest, "", "layout",
                "a data-parallel size of " + std::to_string(dp) + " (at least 1 is needed)");
  GroupLayout g;
  g.index = index;
  int64_t off = 0;
  for (auto& p : params) {
    p.offset = off;
    off += (p.numel + dp - 1) / dp;
    g.numel += p.numel;
  }
  g.partition_numel = off;
  g.padded_numel = off * dp;
  g.params = std::move(params);
  for (int r = 0; r < dp; ++r) {
    RankPartition rp;
    rp.rank = r;
    for (size_t i = 0; i < g.params.size(); ++i) {
      const auto& p = g.params[i];
      const int64_t part = (p.numel + dp - 1) / dp;
      const int64_t start = r * part;
      const int64_t n = std::clamp<int64_t>(p.numel - start, 0, part);
      if (n > 0) {
        rp.fragments.push_back(Fragment{static_cast<int>(i), start, p.offset, n});
        rp.real_numel += n;
      }
    }
    rp.padding = g.partition_numel - rp.real_numel;
    rp.saved_numel = g.partition_numel;
    rp.recorded_padding = 0;  // ZeRO-3 records no paddings
    g.partitions.push_back(std::move(rp));
  }
  return g;
}

}  // namespace ckptdoc::deepspeed
