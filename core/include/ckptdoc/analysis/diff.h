#pragma once
// Tensor-by-tensor comparison of two sources of any kind (DeepSpeed checkpoints, Hugging Face folders,
// weights files): which tensors were added, removed, or changed shape or dtype, and for the rest how far
// apart their values are (max |A-B|, ||A-B|| / ||B||, the share of elements exactly equal). Names match after
// stripping `module.` prefixes. NaN equals NaN at the same place. Tensors stream through in bounded memory,
// each read once: a DeepSpeed side is consolidated on the fly, as export does.
// A source gives its side (sources/deepspeed/diff_side.h, sources/diff_side.h); nothing here knows a source's
// kind.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/compute/statistics.h"  // LogHistogram
#include "ckptdoc/format/safetensors.h"  // NamedTensor
#include "ckptdoc/task/progress.h"

namespace ckptdoc::analysis {

// What of a DeepSpeed checkpoint is compared: consolidated fp32 masters (with buffers and frozen params, as
// zero_to_fp32.py exports them), the 16-bit module weights, or an Adam moment. Weights sources have weights
// only.
enum class DiffWhat : uint8_t { Fp32, Lp, ExpAvg, ExpAvgSq };
DiffWhat parse_diff_what(const std::string& s);  // "fp32" | "lp" | "exp_avg" | "exp_avg_sq"
std::string_view diff_what_name(DiffWhat w);

struct DiffOptions {
  DiffWhat what = DiffWhat::Fp32;
  double atol = 0, rtol = 0;  // equal when |a - b| <= atol + rtol * |b| (torch.allclose(A, B)); default exact
  bool histograms = false;  // also count log|A-B| per tensor (the app plots them; the CLI does not need them)
};

// Where a tensor's differences lie: log|A-B| of the elements where A > B (`above`, which also counts the
// value-equal elements as zeros and the non-finite mismatches) and where A < B (`below`).
struct DiffHistogram {
  LogHistogram above, below;
};

struct TensorDiff {
  std::string name;  // without `module.`
  std::vector<int64_t> shape_a, shape_b;
  DType dtype_a = DType::F32, dtype_b = DType::F32;
  uint64_t numel = 0;
  uint64_t exact = 0;      // value-equal elements (NaN at the same place counts as equal)
  uint64_t close = 0;      // within atol/rtol (>= exact)
  uint64_t nonfinite = 0;  // elements where one side is NaN/Inf and the other is not the same
  double max_abs = 0;      // max |a - b| over finite pairs; +inf when nonfinite > 0
  double sum_sq_diff = 0, sum_sq_b = 0;
  std::shared_ptr<const DiffHistogram> histogram;  // only with DiffOptions::histograms
  double rel_l2() const;          // ||A - B|| / ||B|| over finite pairs (inf when B is 0 and A is not)
  double exact_fraction() const;  // 1 for empty tensors
  bool values_equal() const { return close == numel; }
  bool same() const { return values_equal() && dtype_a == dtype_b; }
};

struct DiffResult {
  std::string a, b;  // what was compared, e.g. "DeepSpeed checkpoint /x/global_step5 (fp32)"
  std::vector<std::string> removed, added;  // only in A / only in B
  std::vector<TensorDiff> shape_changed;    // same name, other shape: not compared
  std::vector<TensorDiff> compared;         // worst first: differing before equal, then by rel L2, max |A-B|
  bool equal() const;
};

// One side of a comparison: what it is ("DeepSpeed checkpoint /x (fp32)") and its tensors, unread.
struct DiffSide {
  std::string what;
  std::vector<NamedTensor> tensors;
};
// Any two sides, each from whichever source reads it (deepspeed::diff_side, sources::open_diff_side).
DiffResult diff(const DiffSide& a, const DiffSide& b, const DiffOptions& options = {},
                Progress* progress = nullptr);

// {"a", "b", "equal", "removed", "added", "shape_changed", "tensors": [{name, dtype_a, dtype_b, shape, numel,
//  max_abs_diff, rel_l2, exact_fraction, equal}, ...]} (ckptdoc diff --json).
std::string diff_json(const DiffResult& result);

}  // namespace ckptdoc::analysis
