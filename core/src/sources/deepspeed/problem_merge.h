#pragma once
// Problems of a diagnosis split over MPI processes that may each see only some rank files: every
// process's catalog and scan problems, gathered, deduplicated, and with the missing-dp-rank problems
// rebuilt from what no process has (a rank on another node's storage is not missing).
#include <vector>

#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed::detail {

// Collective. This process's catalog made the whole checkpoint's as far as the rules look at it: its
// problems become every process's catalog and scan problems (process 0's first, each once), the optimizer
// file count counts the ranks some process has, and its source_rules read that count.
Catalog merged_across_processes(Catalog catalog, const std::vector<Problem>& scan_problems);

}  // namespace ckptdoc::deepspeed::detail
