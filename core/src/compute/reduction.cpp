#include "ckptdoc/compute/reduction.h"

#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"

#if defined(CKPTDOC_HAVE_CUDA) && defined(CKPTDOC_HAVE_NCCL)
#include "compute/cuda/nccl_loader.h"
#include "compute/cuda/nccl_reducer.h"
#endif

namespace ckptdoc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void pack_hist(const LogHistogram& h, std::vector<uint64_t>& c) {
  c.insert(c.end(), h.counts.begin(), h.counts.end());
  c.insert(c.end(), {h.zeros, h.underflow, h.overflow, h.nonfinite});
}

// Bounds-checked reads: a length mismatch between processes must not read past the arrays.
template <class T>
const T& at(const std::vector<T>& v, size_t& i) {
  if (i >= v.size()) throw Error("", "reduction arrays", "shorter than the statistics unpacked from them");
  return v[i++];
}

void unpack_hist(const ReductionArrays& a, UnpackCursor& c, LogHistogram& h) {
  std::array<uint64_t, LogHistogram::kBins> bins{};
  for (auto& x : bins) x = at(a.counts, c.counts);
  h.counts.assign(bins);
  h.zeros = at(a.counts, c.counts);
  h.underflow = at(a.counts, c.counts);
  h.overflow = at(a.counts, c.counts);
  h.nonfinite = at(a.counts, c.counts);
}

// Host all-reduce over MPI_COMM_WORLD (the identity for a single process).
class MpiReducer final : public Reducer {
 public:
  std::string name() const override {
    return mpi_size() > 1 ? "MPI (" + std::to_string(mpi_size()) + " processes)" : "single process";
  }
  void allreduce(ReductionArrays& a) override { mpi_allreduce(a); }
};

}  // namespace

void pack(const ValueStats& s, ReductionArrays& a) {
  a.counts.insert(a.counts.end(), {s.count, s.nan, s.pos_inf, s.neg_inf, s.zeros, s.subnormals, s.negatives});
  pack_hist(s.log_abs, a.counts);
  pack_hist(s.log_abs_negative, a.counts);
  a.sums.insert(a.sums.end(), {s.sum, s.sum_sq});
  const bool finite = s.finite_count() > 0;
  a.mins.push_back(finite ? s.min : kInf);
  a.maxs.push_back(finite ? s.max : -kInf);
}

void pack(const DivergenceStats& s, ReductionArrays& a) {
  a.counts.insert(a.counts.end(), {s.count, s.exact, s.nonfinite});
  pack_hist(s.log_abs_diff, a.counts);
  a.counts.insert(a.counts.end(), s.ulp.counts.begin(), s.ulp.counts.end());
  a.sums.insert(a.sums.end(), {s.sum_abs, s.sum_sq_diff, s.sum_sq_lp, s.sum_sq_fp32});
  a.maxs.push_back(s.max_abs);
}

void unpack(const ReductionArrays& a, UnpackCursor& c, ValueStats& s) {
  for (uint64_t* f : {&s.count, &s.nan, &s.pos_inf, &s.neg_inf, &s.zeros, &s.subnormals, &s.negatives})
    *f = at(a.counts, c.counts);
  unpack_hist(a, c, s.log_abs);
  unpack_hist(a, c, s.log_abs_negative);
  s.sum = at(a.sums, c.sums);
  s.sum_sq = at(a.sums, c.sums);
  s.min = at(a.mins, c.mins);
  s.max = at(a.maxs, c.maxs);
  if (s.finite_count() == 0) s.min = s.max = 0;
}

void unpack(const ReductionArrays& a, UnpackCursor& c, DivergenceStats& s) {
  s.count = at(a.counts, c.counts);
  s.exact = at(a.counts, c.counts);
  s.nonfinite = at(a.counts, c.counts);
  unpack_hist(a, c, s.log_abs_diff);
  std::array<uint64_t, UlpHistogram::kBuckets> ulp{};
  for (auto& u : ulp) u = at(a.counts, c.counts);
  s.ulp.counts.assign(ulp);
  for (double* f : {&s.sum_abs, &s.sum_sq_diff, &s.sum_sq_lp, &s.sum_sq_fp32}) *f = at(a.sums, c.sums);
  s.max_abs = at(a.maxs, c.maxs);
}

bool vote_for_nccl(DeviceKind backend, std::string* note) {
  if (mpi_size() == 1) return false;
  const char* forced = std::getenv("CKPTDOC_REDUCER");
  const bool host_only = forced && std::string(forced) == "mpi";
  // Collective choice, made by every process whatever its own backend: NCCL only when every process runs on
  // CUDA and loads NCCL, else all go over MPI (a communicator that some processes never join would hang
  // the others, and one process skipping this vote would pair its next collective with the vote).
  std::string why;
  bool can = false;
  if (host_only) {
    why = "CKPTDOC_REDUCER=mpi";
  } else if (backend != DeviceKind::Cuda) {
    why = "not every process runs on CUDA";
  } else {
#if defined(CKPTDOC_HAVE_CUDA) && defined(CKPTDOC_HAVE_NCCL)
    can = cuda::nccl_loadable(&why);
#else
    why = "built without NCCL";
#endif
  }
  ReductionArrays vote;
  vote.mins.push_back(can ? 1.0 : 0.0);
  mpi_allreduce(vote);
  const bool all = vote.mins[0] == 1.0;
  // Only worth a note where this process could have used NCCL or says why it could not on CUDA.
  if (!all && note && backend == DeviceKind::Cuda)
    *note =
        "NCCL not used: " + (can ? std::string("not loadable on every process") : why) + "; over MPI instead";
  return all;
}

std::unique_ptr<Reducer> make_reducer(DeviceKind backend, [[maybe_unused]] int device, std::string* note) {
  if (vote_for_nccl(backend, note)) {
#if defined(CKPTDOC_HAVE_CUDA) && defined(CKPTDOC_HAVE_NCCL)
    try {
      return cuda::make_nccl_reducer(device, mpi_rank(), mpi_size(), [](void* data, size_t bytes, int root) {
        mpi_broadcast(data, bytes, root);
      });
    } catch (const std::runtime_error& e) {
      throw Error(ErrorKind::Device, "", "NCCL communicator on device " + std::to_string(device), e.what());
    }
#endif
  }
  return std::make_unique<MpiReducer>();
}

}  // namespace ckptdoc
