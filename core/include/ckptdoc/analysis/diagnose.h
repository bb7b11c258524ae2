#pragma once
// What a diagnosis is asked to do (DiagnoseOptions: plain values, whichever source diagnoses) and a report's
// JSON. The diagnosis of a DeepSpeed checkpoint is deepspeed::diagnose (sources/deepspeed/diagnose.h).
#include <memory>
#include <optional>
#include <string>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::analysis {

struct DiagnoseOptions {
  DeviceKind device = DeviceKind::Auto;
  unsigned threads = 0;  // CPU worker threads (0 = all cores)
  // Host threads feeding each GPU, each with its own streams and pinned buffers: the copy out of the memory
  // map into pinned memory is host work, so one thread per GPU cannot keep a PCIe 5 link busy. 0 = up to 4,
  // at most the cores per GPU.
  unsigned gpu_workers = 0;
  // TEST SCAFFOLDING, no CLI or GUI option sets it: for tests of the multi-GPU schedule on machines without
  // GPUs, this many one-thread CPU backends, each given whole rank files like one GPU of several (0 = off).
  unsigned emulated_devices = 0;
  // Also check every zip record's CRC-32 (reads every byte of every file once more; finds corruption that
  // leaves valid-looking values).
  bool verify_checksums = false;
  // Tensor-parallel jobs: a rule file (sources/deepspeed/tp_rules.h) saying which params are replicated
  // across tensor ranks; default: the checkpoint's universal_checkpoint_info.
  std::optional<std::string> tp_rules;
  // ZeRO-3: 16-bit weights saved elsewhere (a file) to compare the fp32 partitions with; default: weights
  // saved beside the checkpoint, if any.
  std::optional<std::string> lp_source;
  // Only what the stale-master verdict (fp32-master-mismatch) rests on: the 16-bit weights and the fp32
  // masters. The moments, the weights saved beside a checkpoint's optimizer files, a live snapshot and the
  // tensor-parallel comparison are not read, and the optimizer rules do not run: the export's check before
  // writing masters reads 6 of every 14 bytes per element instead of all of them (bf16 with fp32 Adam).
  bool masters_only = false;
};

// JSON text of a report: {"findings": [...], "params": [...]} as the CLI's --json prints it.
std::string report_json(const Report& report, const model::Catalog& catalog);

}  // namespace ckptdoc::analysis
