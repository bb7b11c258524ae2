#include "ckptdoc/sources/deepspeed/param_density.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "sources/deepspeed/tensor_slice.h"

namespace ckptdoc::deepspeed {

using analysis::Density2D;

namespace {

using deepspeed::detail::slice_1d;

// One run of the param's elements: where they sit in the flat lp weight and in a rank's fp32 partition.
struct Run {
  Tensor fp32;
  int64_t param_offset = 0, partition_offset = 0, numel = 0;
};

// The checkpoint's files, and the masters' files opened for this read alone (a universal param's): a file cut
// while mapped reads as zeros, so no plot from those.
void check_unchanged(const deepspeed::Checkpoint& ckpt, const std::vector<Run>& runs) {
  ckpt.check_unchanged();
  for (const auto& r : runs) r.fp32.check_unchanged();
}

// The lp weight as a flat 1-D view of its elements (no copy).
std::optional<Tensor> flat_view(const Tensor& t) {
  if (!t.is_contiguous()) return std::nullopt;
  Tensor f = t;
  f.shape = {t.numel()};
  f.strides = {1};
  return f;
}

// Calls fn(lp, fp32) for every chunk of every run, each span at most `chunk` elements long.
template <class Fn>
void for_each_chunk(const Tensor& lp, const std::vector<Run>& runs, int64_t chunk, Progress* progress,
                    Fn fn) {
  for (const auto& run : runs) {
    for (int64_t k = 0; k < run.numel; k += chunk) {
      if (progress) progress->check();
      const int64_t n = std::min(chunk, run.numel - k);
      const std::vector<float> x = slice_1d(lp, run.param_offset + k, n).to_float();
      const std::vector<float> y = slice_1d(run.fp32, run.partition_offset + k, n).to_float();
      fn(x, y);
      if (progress) progress->add(static_cast<uint64_t>(n));
    }
  }
}

}  // namespace

Density2D param_density(const Checkpoint& ckpt, int group, int param, int bins, Progress* progress,
                        int64_t chunk_elements) {
  if (bins < 1) throw Error(ErrorKind::InvalidRequest, "", "param_density", "bins must be at least 1");
  const auto& cat = ckpt.catalog();
  if (group < 0 || static_cast<size_t>(group) >= cat.groups.size())
    throw Error(ErrorKind::InvalidRequest, cat.tag_dir, "group " + std::to_string(group),
                "no such param group");
  const auto& g = cat.groups[static_cast<size_t>(group)];
  if (param < 0 || static_cast<size_t>(param) >= g.params.size())
    throw Error(ErrorKind::InvalidRequest, cat.tag_dir,
                "group " + std::to_string(group) + " param " + std::to_string(param), "no such param");
  const auto& pe = g.params[static_cast<size_t>(param)];
  const int64_t chunk = std::max<int64_t>(1, chunk_elements);

  Density2D d;
  d.bins = bins;
  d.counts.assign(static_cast<size_t>(bins) * static_cast<size_t>(bins), 0);
  const std::optional<Tensor> lp_tensor = ckpt.lp_param(pe.name);
  if (!lp_tensor) return d;
  std::optional<Tensor> lp = flat_view(*lp_tensor);
  if (!lp) {  // a strided module weight (never seen in DeepSpeed's files): one contiguous copy
    Tensor c = Tensor::from_bytes(lp_tensor->dtype, {lp_tensor->numel()}, lp_tensor->to_bytes());
    lp = c;
  }
  if (lp->numel() != pe.numel)
    throw Error(ErrorKind::Inconsistent, cat.tag_dir, "param " + pe.name,
                expected_found(std::to_string(pe.numel) + " weight elements", std::to_string(lp->numel())));
  std::vector<Run> runs;
  for (const auto& part : g.partitions)
    for (const auto& f : part.fragments) {
      if (f.param != param) continue;
      std::optional<Tensor> fp32 = ckpt.fp32_partition(group, part.rank);
      if (!fp32) return d;
      runs.push_back({*fp32, f.param_offset, f.partition_offset, f.numel});
    }
  if (progress) progress->set_stage("density of " + pe.name, 2 * static_cast<uint64_t>(pe.numel));

  // Pass 1: the common range of the finite pairs (as density_2d computes it).
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for_each_chunk(*lp, runs, chunk, progress, [&](const std::vector<float>& x, const std::vector<float>& y) {
    for (size_t i = 0; i < x.size(); ++i) {
      if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
        ++d.nonfinite;
        continue;
      }
      lo = std::min({lo, static_cast<double>(x[i]), static_cast<double>(y[i])});
      hi = std::max({hi, static_cast<double>(x[i]), static_cast<double>(y[i])});
    }
  });
  if (lo > hi) {
    check_unchanged(ckpt, runs);
    return d;
  }
  if (hi == lo) {
    lo -= 1;
    hi += 1;
  }
  d.lo = lo;
  d.hi = hi;
  // Pass 2: the counts, with density_2d's binning.
  const double scale = bins / (hi - lo);
  auto bin = [&](float v) { return std::clamp(static_cast<int>((v - lo) * scale), 0, bins - 1); };
  for_each_chunk(*lp, runs, chunk, progress, [&](const std::vector<float>& x, const std::vector<float>& y) {
    for (size_t i = 0; i < x.size(); ++i) {
      if (!std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
      ++d.counts[static_cast<size_t>(bin(y[i])) * static_cast<size_t>(bins) + static_cast<size_t>(bin(x[i]))];
      ++d.pairs;
    }
  });
  d.max_count = *std::max_element(d.counts.begin(), d.counts.end());
  check_unchanged(ckpt, runs);  // a rank file cut while mapped reads as zeros: no plot from those
  return d;
}

}  // namespace ckptdoc::deepspeed
