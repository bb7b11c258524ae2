#pragma once
// The result of a diagnosis: named findings (stable codes, plain-language messages, evidence numbers) and
// per-param statistics, in a form the CLI prints, the GUI draws and JSON carries.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/compute/statistics.h"
#include "ckptdoc/dtype.h"
#include "ckptdoc/model/finding.h"
#include "ckptdoc/weights/optimizer_file.h"

namespace ckptdoc::analysis {

// Severity, RepairKind and the finding codes live in the one table (model/finding_codes.h); these names keep
// the analysis spelling its callers use.
using model::repair_name;
using model::RepairKind;
using model::Severity;
using model::severity_name;
using model::severity_of;

// Catalog problems and analysis findings are one type (model/finding.h).
using model::Finding;

// A finding of `code` with the code table's severity and repair (model/finding_codes.h); a site that needs
// another severity sets it and says why.
inline Finding finding_of(model::Code code, std::string message = {}) {
  return Finding(code, std::move(message));
}

// Sums over one rank's fragment of a param's Adam moments (finite elements only), so a picture can shade each
// fragment by its moment magnitude: a rank whose moments were lost reads as zero among its neighbours.
struct RankMoments {
  uint64_t exp_avg_count = 0, exp_avg_sq_count = 0;
  double exp_avg_sum_sq = 0, exp_avg_sq_sum = 0;
  double exp_avg_rms() const;      // NaN when there is no exp_avg
  double exp_avg_sq_mean() const;  // NaN when there is no exp_avg_sq
};

// Statistics of one trainable param (all ranks merged) plus per-rank divergence.
struct ParamReport {
  std::string name;
  int group = 0;
  int pp = -1,
      tp = -1;  // its model-parallel rank in a tensor/pipeline-parallel job (names repeat across tp ranks)
  std::vector<int64_t> shape;
  int64_t numel = 0;
  DType lp_dtype = DType::F32;
  std::optional<DivergenceStats> lp_vs_fp32;  // absent when lp or fp32 is unavailable (e.g. ZeRO-3)
  std::optional<ValueStats> lp, fp32, exp_avg, exp_avg_sq;
  std::map<int, DivergenceStats> per_rank;  // dp rank -> divergence of this param's fragment there
  // tensor ("lp", "fp32", "exp_avg", "exp_avg_sq") -> dp rank -> NaN/Inf count, only where non-zero
  std::map<std::string, std::map<int, uint64_t>> nonfinite_by_rank;
  std::map<int, RankMoments> moments_by_rank;  // dp rank -> its fragment's moment sums (when moments exist)
  // How bad the lp/fp32 disagreement is, for sorting worst-first (0 = identical up to rounding).
  double severity_score() const;
};

// What one device of a multi-GPU scan did: the dp ranks whose files it read and the bytes it scanned.
struct DeviceShare {
  std::string backend;
  std::vector<int> ranks;
  uint64_t bytes = 0;
};

// What a live-engine snapshot adds to a diagnosis (sources/deepspeed/live_report.cpp); absent for checkpoints
// on disk.
struct LiveReport {
  std::string snapshot_id;
  double created_unix = 0;
  int64_t global_steps = 0, global_samples = 0, skipped_steps = 0;
  std::optional<double> grad_norm;                   // DeepSpeed's last global grad norm
  std::optional<double> gradient_clipping;           // the clip value (0: off)
  std::optional<double> loss_scale, min_loss_scale;  // fp16
  std::optional<bool> overflow;
  std::vector<std::optional<double>> lr;  // per param group
  bool grads_requested = false, grads_present = false;
  std::optional<double> recorded_grad_norm;  // L2 of the recorded gradient partitions of all ranks, unscaled
  uint64_t grad_numel = 0, grad_nonfinite = 0;
  std::map<std::string, uint64_t> grad_nonfinite_by_param;
};

struct Report {
  std::vector<Finding> findings;  // errors first, then warnings, then info
  std::vector<ParamReport> params;
  std::string backend;               // which compute backend ran (and how processes merged their results)
  std::vector<DeviceShare> devices;  // this process's devices when it drove several, else empty
  uint64_t bytes_scanned = 0;
  double seconds = 0;
  std::optional<LiveReport> live;  // snapshots of a live engine only
  // A weights folder's optimizer files (Accelerate's optimizer.bin), read and checked beside the weights.
  std::vector<weights::OptimizerFileSummary> optimizer_files;
  bool has_error() const;
};

}  // namespace ckptdoc::analysis
