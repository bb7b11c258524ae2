#pragma once
// The result of a diagnosis: named findings (stable codes, plain-language messages, evidence numbers) and
// per-param statistics, in a form the CLI prints, the GUI draws and JSON carries.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/compute/statistics.h"
#include "ckptdoc/deepspeed/catalog.h"

namespace ckptdoc::analysis {

enum class Severity : uint8_t { Info, Warning, Error };
std::string_view severity_name(Severity s);  // "info" | "warning" | "error"

// Which repair (if any) fixes a finding, so front ends can offer a Fix button.
enum class RepairKind : uint8_t { None, RefreshFp32, ResetOptimizer, DropOptimizer, Repartition };
std::string_view repair_name(RepairKind r);  // "", "refresh-fp32", "reset-optimizer", "drop-optimizer", "repartition"

struct Finding {
  std::string code;  // e.g. "fp32-master-mismatch"
  Severity severity = Severity::Info;
  std::string message;                  // what happened and what to do, in plain words
  std::vector<std::string> params;
  std::vector<int> ranks;
  std::map<std::string, double> evidence;  // named numbers backing the finding
  RepairKind repair = RepairKind::None;
  // Tensor/pipeline-parallel jobs: the model-parallel rank it concerns (ranks are that rank's dp ranks);
  // -1: the whole job or a data-parallel one.
  int pp = -1, tp = -1;
};

// Statistics of one trainable param (all ranks merged) plus per-rank divergence.
struct ParamReport {
  std::string name;
  int group = 0;
  int pp = -1, tp = -1;  // its model-parallel rank in a tensor/pipeline-parallel job (names repeat across tp ranks)
  std::vector<int64_t> shape;
  int64_t numel = 0;
  DType lp_dtype = DType::F32;
  std::optional<DivergenceStats> lp_vs_fp32;  // absent when lp or fp32 is unavailable (e.g. ZeRO-3)
  std::optional<ValueStats> lp, fp32, exp_avg, exp_avg_sq;
  std::map<int, DivergenceStats> per_rank;     // dp rank -> divergence of this param's fragment there
  // tensor ("lp", "fp32", "exp_avg", "exp_avg_sq") -> dp rank -> NaN/Inf count, only where non-zero
  std::map<std::string, std::map<int, uint64_t>> nonfinite_by_rank;
  // How bad the lp/fp32 disagreement is, for sorting worst-first (0 = identical up to rounding).
  double severity_score() const;
};

// What one device of a multi-GPU scan did: the dp ranks whose files it read and the bytes it scanned.
struct DeviceShare {
  std::string backend;
  std::vector<int> ranks;
  uint64_t bytes = 0;
};

struct Report {
  std::vector<Finding> findings;  // errors first, then warnings, then info
  std::vector<ParamReport> params;
  std::string backend;            // which compute backend ran (and how processes merged their results)
  std::vector<DeviceShare> devices;  // this process's devices when it drove several, else empty
  uint64_t bytes_scanned = 0;
  double seconds = 0;
  bool has_error() const;
};

}  // namespace ckptdoc::analysis
