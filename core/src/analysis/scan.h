#pragma once
// The streaming statistics pass: every trainable param's fragments on every rank, read through the memory
// map and handed to a compute backend, merged per param in a deterministic order.
#include <map>
#include <string>
#include <vector>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/analysis/report.h"
#include "ckptdoc/deepspeed/checkpoint.h"

namespace ckptdoc::analysis {

// Elements the scan could not analyse, or that hold nothing to analyse, by reason (not_analysed.h lists the
// reasons and their severity).
using NotAnalysed = std::map<std::string, uint64_t>;

struct ScanResult {
  std::vector<ParamReport> params;  // in catalog order (group, then param)
  std::string backend;
  std::vector<DeviceShare> devices;
  uint64_t bytes_scanned = 0;
  std::vector<deepspeed::Problem> problems;  // tensors that could not be read
  NotAnalysed not_analysed;                  // every element skipped, counted (merged across MPI processes)
};

ScanResult scan_params(const deepspeed::Checkpoint& ckpt, const DiagnoseOptions& options, Progress* progress);

}  // namespace ckptdoc::analysis
