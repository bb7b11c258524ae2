#pragma once
// The streaming statistics pass of deepspeed::diagnose: every trainable param's fragments on every rank, read
// through the memory map and handed to a compute backend, merged per param in a deterministic order.
#include <string>
#include <vector>

#include "analysis/not_analysed.h"
#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::deepspeed::detail {

struct ScanResult {
  std::vector<analysis::ParamReport> params;  // in catalog order (group, then param)
  std::string backend;
  std::vector<analysis::DeviceShare> devices;
  uint64_t bytes_scanned = 0;
  std::vector<deepspeed::Problem> problems;  // tensors that could not be read
  analysis::NotAnalysed not_analysed;        // every element skipped, counted (merged across MPI processes)
};

ScanResult scan_params(const Checkpoint& ckpt, const analysis::DiagnoseOptions& options, Progress* progress);

}  // namespace ckptdoc::deepspeed::detail
