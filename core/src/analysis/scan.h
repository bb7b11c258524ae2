#pragma once
// The streaming statistics pass: every trainable param's fragments on every rank, read through the memory
// map and handed to a compute backend, merged per param in a deterministic order.
#include <vector>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/analysis/report.h"

namespace ckptdoc::analysis {

struct ScanResult {
  std::vector<ParamReport> params;  // in catalog order (group, then param)
  std::string backend;
  std::vector<DeviceShare> devices;
  uint64_t bytes_scanned = 0;
  std::vector<deepspeed::Problem> problems;  // tensors that could not be read
};

ScanResult scan_params(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options, Progress* progress);

}  // namespace ckptdoc::analysis
