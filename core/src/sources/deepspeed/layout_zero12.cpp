// Flat partition layout of ZeRO-1/2 (DeepSpeedZeroOptimizer, §5.1) and BF16_Optimizer (§5.2) groups.
#include <algorithm>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/layout.h"

namespace ckptdoc::deepspeed {
namespace {

int64_t round_up(int64_t n, int64_t a) {
  return a <= 0 ? n : (n + a - 1) / a * a;
}

// Python's t[:length] on a tensor of p elements.
int64_t python_slice_len(int64_t p, int64_t length) {
  if (length >= 0) return std::min(length, p);
  return std::max<int64_t>(0, p + length);
}

// Offsets, numels and the equal split shared by both wrappers; saved lengths/records are filled by callers.
GroupLayout flat_layout(int index, std::vector<ParamEntry> params, int dp, int64_t alignment) {
  if (dp < 1)
    throw Error(ErrorKind::InvalidRequest, "", "layout",
                "a data-parallel size of " + std::to_string(dp) + " (at least 1 is needed)");
  GroupLayout g;
  g.index = index;
  int64_t off = 0;
  for (auto& p : params) {
    p.offset = off;
    off += p.numel;
  }
  g.numel = off;
  g.padded_numel = round_up(off, alignment);
  g.partition_numel = g.padded_numel / dp;
  g.params = std::move(params);
  const int64_t part = g.partition_numel;
  for (int r = 0; r < dp; ++r) {
    RankPartition rp;
    rp.rank = r;
    const int64_t lo = r * part, hi = lo + part;
    for (size_t i = 0; i < g.params.size(); ++i) {
      const auto& p = g.params[i];
      const int64_t plo = p.offset, phi = p.offset + p.numel;
      if (plo < hi && phi > lo && p.numel > 0) {
        const int64_t fs = std::max(plo, lo), fe = std::min(phi, hi);
        rp.fragments.push_back(Fragment{static_cast<int>(i), fs - plo, fs - lo, fe - fs});
        rp.real_numel += fe - fs;
      }
    }
    rp.padding = part - rp.real_numel;
    g.partitions.push_back(std::move(rp));
  }
  return g;
}

}  // namespace

std::vector<size_t> round_robin_order(size_t n, int dp) {
  std::vector<size_t> order;
  order.reserve(n);
  const size_t k = static_cast<size_t>(std::max(dp, 1));
  for (size_t bucket = 0; bucket < std::min(k, n); ++bucket) {
    for (size_t i = bucket; i < n; i += k) order.push_back(i);
  }
  return order;
}

GroupLayout layout_zero12(int index, std::vector<ParamEntry> params, int dp, const Zero12Rules& rules) {
  GroupLayout g =
      flat_layout(index, std::move(params), dp, static_cast<int64_t>(rules.alignment_factor) * dp);
  const int64_t part = g.partition_numel;
  const int64_t total_pad = g.padded_numel - g.numel;
  for (auto& rp : g.partitions) {
    const bool last = rp.rank == dp - 1;
    switch (rules.padding) {
      case PaddingRule::Exact:
        rp.recorded_padding = rp.padding;
        break;
      case PaddingRule::LastRankTotal:
        rp.recorded_padding = last ? total_pad : 0;
        break;
      case PaddingRule::LastRankModDp:
        rp.recorded_padding = last ? (dp - g.numel % dp) % dp : 0;
        break;
    }
    rp.saved_numel = python_slice_len(part, part - rp.recorded_padding);
  }
  return g;
}

GroupLayout layout_bf16_optimizer(int index, std::vector<ParamEntry> params, int dp) {
  GroupLayout g = flat_layout(index, std::move(params), dp, 2 * static_cast<int64_t>(dp));
  for (auto& rp : g.partitions) {
    rp.recorded_padding = rp.rank == dp - 1 ? g.padded_numel - g.numel : 0;
    rp.saved_numel = g.partition_numel;  // BF16_Optimizer saves the full padded partition
  }
  return g;
}

std::vector<SliceMapping> expected_slice_mappings(const GroupLayout& group, int part) {
  std::vector<SliceMapping> out;
  if (part < 0 || static_cast<size_t>(part) >= group.partitions.size()) return out;
  for (const auto& f : group.partitions[static_cast<size_t>(part)].fragments) {
    out.push_back(SliceMapping{group.params[static_cast<size_t>(f.param)].name, f.numel, f.partition_offset});
  }
  return out;
}

std::vector<SliceMapping> slice_mappings_in(const GroupLayout& group, int64_t lo, int64_t size) {
  std::vector<SliceMapping> out;
  const int64_t hi = lo + size;
  for (const auto& p : group.params) {
    const int64_t plo = p.offset, phi = p.offset + p.numel;
    if (p.numel > 0 && plo < hi && phi > lo) {
      const int64_t fs = std::max(plo, lo), fe = std::min(phi, hi);
      out.push_back(SliceMapping{p.name, fe - fs, fs - lo});
    }
  }
  return out;
}

}  // namespace ckptdoc::deepspeed
