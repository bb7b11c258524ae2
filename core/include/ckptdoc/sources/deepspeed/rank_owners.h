#pragma once
// Which MPI process reads each dp rank's files, for work split over processes that may each see only some
// of the rank files (DeepSpeed's use_node_local_storage: a node holds its own ranks' files under the same
// path) or all of them (a shared file system).
#include <string>
#include <vector>

#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed {

struct RankOwners {
  std::vector<int> owner;  // per dp rank: the process that reads its files, -1 when no process has them
  std::vector<bool> optim_nowhere;  // per dp rank: no process has its optimizer file
  std::vector<bool> model_nowhere;  // per dp rank (ZeRO-3 only): no process has its model file
  int procs = 1, me = 0;
  bool mine(int rank) const {
    return rank >= 0 && rank < static_cast<int>(owner.size()) && owner[static_cast<size_t>(rank)] == me;
  }
};

// Collective under MPI (every process calls it with its own catalog of the same checkpoint). A rank goes to
// the least loaded process that has its optimizer file (ties: the lowest process), which on a shared file
// system is rank r -> process r % P. A single process owns every rank whose file it has.
RankOwners rank_owners(const Catalog& cat, int dp);

// The catalog's "rank-file-missing" problems for dp ranks, with the wording the catalog uses; a distributed
// diagnosis rebuilds them from what is missing on every process.
Problem missing_optim_files_problem(const std::vector<int>& ranks, int dp);
Problem missing_zero3_model_files_problem(const std::vector<int>& ranks, int dp);
bool is_missing_dp_rank_problem(const Problem& p);
// The ZeRO-3 model files of that pair (repair --restore-model-files writes them).
bool is_missing_zero3_model_files_problem(const Problem& p);

}  // namespace ckptdoc::deepspeed
