#pragma once
// Internal to core: an export's tensors made to report their bytes to a Progress as a writer pulls them, and
// to stop (Cancelled) between steps of a few MiB when the Progress was cancelled, so a long export of one
// huge tensor still moves its bar and stops promptly. The bytes written are the same: only who counts them
// changes.
#include <cstdint>
#include <vector>

#include "ckptdoc/format/safetensors.h"  // NamedTensor
#include "ckptdoc/task/progress.h"

namespace ckptdoc::detail {

struct ProgressTensors {
  std::vector<NamedTensor> tensors;  // the same names, shapes and shared storages
  uint64_t total_bytes = 0;          // what the writers will report, at most (each storage counted once)
};

// Whole-storage tensors (aliases share one wrapped storage) count their bytes into `progress`; a tensor that
// is a view on part of a storage is left as it is (its bytes are not counted). A storage pulled twice counts
// once, so done() never passes total_bytes.
ProgressTensors with_progress(const std::vector<NamedTensor>& tensors, Progress& progress);

}  // namespace ckptdoc::detail
