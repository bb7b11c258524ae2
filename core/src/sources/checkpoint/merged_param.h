#pragma once
// One param of a universal checkpoint as the rank files hold it: a slice per tensor-parallel rank, each
// spread over the data-parallel ranks' flat fp32 partitions, merged as ds_to_universal.py::merge_tp_slices
// merges them (§7.2 step 4). The merged values are produced in order, straight from the mapped partitions:
// file ranges where the merged tensor is a run of one partition, a small buffer where values change
// (averaged).
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ckptdoc/format/value.h"
#include "ckptdoc/io/file_io.h"
#include "sources/checkpoint/tp_patterns.h"

namespace ckptdoc::universal::detail {

constexpr size_t kStateCount = 3;  // fp32, exp_avg, exp_avg_sq (ds_to_universal's order)

// The mapped float32 partitions of one model-parallel slice: [group][dp rank][state].
struct SlicePartitions {
  std::vector<std::vector<std::array<const float*, kStateCount>>> data;
  std::vector<std::vector<std::array<Tensor, kStateCount>>> keep;  // the views (keep the mappings alive)
};

// One contiguous run of a slice's elements in one dp rank's flat partition.
struct Run {
  int rank = 0;
  int64_t param_offset = 0, partition_offset = 0, numel = 0;
};

// A param's slice on one tensor-parallel rank.
struct SlicePart {
  const SlicePartitions* partitions = nullptr;
  int group = 0;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  std::vector<Run> runs;  // by param_offset, covering [0, numel)
};

struct MergedParam {
  std::string name;
  std::vector<SlicePart> parts;  // by tensor-parallel rank
  ParamMerge merge;
  std::vector<int64_t> out_shape;  // merged; vocabulary params lose their padded rows
  int64_t out_numel = 0;

  // Checks the slices fit the merge and sets out_shape/out_numel; returns "" or what is wrong.
  std::string plan();
  // Elements [first, first + n) of the merged `state`. Averaged params are Python's sum(slices) / len, in
  // float32 (so -0.0 becomes +0.0).
  void fill(size_t state, int64_t first, int64_t n, float* out) const;
  // Elements [first, first + n) of tensor rank k's slice of `state`.
  void fill_part(size_t k, size_t state, int64_t first, int64_t n, float* out) const;
  // Writes the merged `state` to `sink` (out_numel float32 values), handing read pages back after.
  // `check` is called between chunks (cancelling, progress).
  void write(size_t state, ByteSink& sink, const std::function<void()>& check) const;
};

}  // namespace ckptdoc::universal::detail
