#pragma once
// Combining partial statistics across processes. A scan packs everything it must merge (per-param and
// per-rank statistics) into four flat arrays and reduces them element-wise in one collective each, instead
// of one collective per statistic: with thousands of params on hundreds of ranks that is the difference
// between four messages and millions.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/compute/statistics.h"

namespace ckptdoc {

// counts are summed, sums summed, mins take the minimum and maxs the maximum over processes.
struct ReductionArrays {
  std::vector<uint64_t> counts;
  std::vector<double> sums, mins, maxs;
};

// Appends a statistic's fields; unpacking in the same order with one cursor gives the merged statistic.
// Min/max of a part with no finite value travel as +inf/-inf so they never win.
void pack(const ValueStats& s, ReductionArrays& a);
void pack(const DivergenceStats& s, ReductionArrays& a);
struct UnpackCursor {
  size_t counts = 0, sums = 0, mins = 0, maxs = 0;
};
// Throws ckptdoc::Error when the arrays are shorter than the statistic needs.
void unpack(const ReductionArrays& a, UnpackCursor& at, ValueStats& s);
void unpack(const ReductionArrays& a, UnpackCursor& at, DivergenceStats& s);

// One element-wise all-reduce of the four arrays over a group of processes; every process passes arrays of
// the same lengths and gets the same result.
class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual std::string name() const = 0;  // e.g. "MPI (2 processes)", "NCCL 2.27.7 over MPI (8 processes)"
  virtual void allreduce(ReductionArrays& a) = 0;
};

// Bytes from `root` to every process (the NCCL bootstrap's unique id travels this way).
using BroadcastFn = std::function<void(void* data, size_t bytes, int root)>;

// The reducer for a scan that ran on `backend` (this process's device index `device` for CUDA). Collective
// under MPI (every process calls it): NCCL bootstrapped over MPI when every process runs on CUDA and loads
// NCCL, otherwise MPI on host memory; the identity for a single process. `note` says why a CUDA process did
// not get NCCL. CKPTDOC_REDUCER=mpi forces the host path.
std::unique_ptr<Reducer> make_reducer(DeviceKind backend, int device, std::string* note = nullptr);

// The collective vote behind make_reducer and make_exchanger: true on every process when every process runs
// on CUDA and can load NCCL (and CKPTDOC_REDUCER is not "mpi"); false for a single process. `note` as above.
bool vote_for_nccl(DeviceKind backend, std::string* note = nullptr);

}  // namespace ckptdoc
