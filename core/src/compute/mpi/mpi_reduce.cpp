// MPI versions of distributed.h: counts travel as one uint64 array, sums as one double array, extremes with
// MPI_MIN / MPI_MAX, all over MPI_COMM_WORLD.
// The C API only: Open MPI's mpi.h otherwise drags in its deprecated C++ bindings (MPI::Comm, ...).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "ckptdoc/compute/distributed.h"

namespace ckptdoc {
namespace {

bool g_we_initialised = false;

void append(std::vector<uint64_t>& v, const LogHistogram& h) {
  v.insert(v.end(), h.counts.begin(), h.counts.end());
  v.push_back(h.zeros);
  v.push_back(h.underflow);
  v.push_back(h.overflow);
  v.push_back(h.nonfinite);
}
size_t take(const std::vector<uint64_t>& v, size_t at, LogHistogram& h) {
  for (auto& c : h.counts) c = v[at++];
  h.zeros = v[at++];
  h.underflow = v[at++];
  h.overflow = v[at++];
  h.nonfinite = v[at++];
  return at;
}

void sum_u64(std::vector<uint64_t>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
}
void reduce_d(std::vector<double>& v, MPI_Op op) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, op, MPI_COMM_WORLD);
}

}  // namespace

void mpi_init(int* argc, char*** argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    MPI_Init(argc, argv);
    g_we_initialised = true;
  }
}

void mpi_finalize() {
  if (g_we_initialised && mpi_active()) MPI_Finalize();
  g_we_initialised = false;
}

bool mpi_active() {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  return inited && !finalized;
}

int mpi_rank() {
  if (!mpi_active()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_size() {
  if (!mpi_active()) return 1;
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void mpi_allreduce_stats(ValueStats& s) {
  if (!mpi_active()) return;
  std::vector<uint64_t> c{s.count, s.nan, s.pos_inf, s.neg_inf, s.zeros, s.subnormals, s.negatives};
  append(c, s.log_abs);
  append(c, s.log_abs_negative);
  const bool finite = s.finite_count() > 0;
  std::vector<double> sums{s.sum, s.sum_sq};
  std::vector<double> mx{finite ? s.max : -std::numeric_limits<double>::infinity()};
  std::vector<double> mn{finite ? s.min : std::numeric_limits<double>::infinity()};
  sum_u64(c);
  reduce_d(sums, MPI_SUM);
  reduce_d(mx, MPI_MAX);
  reduce_d(mn, MPI_MIN);
  s.count = c[0];
  s.nan = c[1];
  s.pos_inf = c[2];
  s.neg_inf = c[3];
  s.zeros = c[4];
  s.subnormals = c[5];
  s.negatives = c[6];
  size_t at = take(c, 7, s.log_abs);
  take(c, at, s.log_abs_negative);
  s.sum = sums[0];
  s.sum_sq = sums[1];
  if (s.finite_count() > 0) {
    s.min = mn[0];
    s.max = mx[0];
  } else {
    s.min = s.max = 0;
  }
}

void mpi_allreduce_divergence(DivergenceStats& s) {
  if (!mpi_active()) return;
  std::vector<uint64_t> c{s.count, s.exact, s.nonfinite};
  append(c, s.log_abs_diff);
  c.insert(c.end(), s.ulp.counts.begin(), s.ulp.counts.end());
  std::vector<double> sums{s.sum_abs, s.sum_sq_diff, s.sum_sq_lp, s.sum_sq_fp32};
  std::vector<double> mx{s.max_abs};
  sum_u64(c);
  reduce_d(sums, MPI_SUM);
  reduce_d(mx, MPI_MAX);
  s.count = c[0];
  s.exact = c[1];
  s.nonfinite = c[2];
  size_t at = take(c, 3, s.log_abs_diff);
  for (auto& u : s.ulp.counts) u = c[at++];
  s.sum_abs = sums[0];
  s.sum_sq_diff = sums[1];
  s.sum_sq_lp = sums[2];
  s.sum_sq_fp32 = sums[3];
  s.max_abs = mx[0];
}

}  // namespace ckptdoc
