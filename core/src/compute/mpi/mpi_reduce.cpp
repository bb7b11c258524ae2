// MPI versions of distributed.h over MPI_COMM_WORLD.
// The C API only: Open MPI's mpi.h otherwise drags in its deprecated C++ bindings (MPI::Comm, ...).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <cstdint>
#include <vector>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"

namespace ckptdoc {
namespace {

bool g_we_initialised = false;
MPI_Comm g_node = MPI_COMM_NULL;  // the processes sharing this node, made on first use

MPI_Comm node_comm() {
  if (g_node == MPI_COMM_NULL) MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &g_node);
  return g_node;
}

// MPI counts are int: long arrays go in chunks.
template <class T>
void allreduce_chunks(std::vector<T>& v, MPI_Datatype type, MPI_Op op) {
  constexpr size_t kChunk = size_t{1} << 28;
  for (size_t at = 0; at < v.size(); at += kChunk) {
    const size_t n = std::min(kChunk, v.size() - at);
    const int rc = MPI_Allreduce(MPI_IN_PLACE, v.data() + at, static_cast<int>(n), type, op, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) throw Error("", "MPI_Allreduce", "failed with MPI error " + std::to_string(rc));
  }
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
  if (g_we_initialised && mpi_active()) {
    if (g_node != MPI_COMM_NULL) MPI_Comm_free(&g_node);
    MPI_Finalize();
  }
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

int mpi_local_rank() {
  if (!mpi_active()) return 0;
  int r = 0;
  MPI_Comm_rank(node_comm(), &r);
  return r;
}

int mpi_local_size() {
  if (!mpi_active()) return 1;
  int s = 1;
  MPI_Comm_size(node_comm(), &s);
  return s;
}

void mpi_broadcast(void* data, size_t bytes, int root) {
  if (!mpi_active() || mpi_size() == 1 || bytes == 0) return;
  if (bytes > static_cast<size_t>(INT_MAX)) throw Error("", "MPI_Bcast", "message of " + std::to_string(bytes) + " bytes");
  const int rc = MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) throw Error("", "MPI_Bcast", "failed with MPI error " + std::to_string(rc));
}

void mpi_allreduce(ReductionArrays& a) {
  if (!mpi_active() || mpi_size() == 1) return;
  allreduce_chunks(a.counts, MPI_UINT64_T, MPI_SUM);
  allreduce_chunks(a.sums, MPI_DOUBLE, MPI_SUM);
  allreduce_chunks(a.mins, MPI_DOUBLE, MPI_MIN);
  allreduce_chunks(a.maxs, MPI_DOUBLE, MPI_MAX);
}

void mpi_allgather(const void* mine, size_t bytes, void* all) {
  if (!mpi_active() || mpi_size() == 1) {
    if (bytes) std::memcpy(all, mine, bytes);
    return;
  }
  if (bytes > static_cast<size_t>(INT_MAX)) throw Error("", "MPI_Allgather", "message of " + std::to_string(bytes) + " bytes");
  const int rc = MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE,
                               MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) throw Error("", "MPI_Allgather", "failed with MPI error " + std::to_string(rc));
}

void mpi_barrier() {
  if (mpi_active() && mpi_size() > 1) MPI_Barrier(MPI_COMM_WORLD);
}

void mpi_alltoallv(const float* send, const size_t* send_counts, float* recv, const size_t* recv_counts) {
  const int procs = mpi_size();
  if (!mpi_active() || procs == 1) {
    if (send_counts[0]) std::memcpy(recv, send, send_counts[0] * sizeof(float));
    return;
  }
  // MPI counts and displacements are int: callers keep a round under 2^31 floats in all.
  std::vector<int> sc(static_cast<size_t>(procs)), sd(sc.size()), rc(sc.size()), rd(sc.size());
  size_t s_at = 0, r_at = 0;
  for (size_t p = 0; p < sc.size(); ++p) {
    if (s_at + send_counts[p] > static_cast<size_t>(INT_MAX) || r_at + recv_counts[p] > static_cast<size_t>(INT_MAX))
      throw Error("", "MPI_Alltoallv", "a round of more than 2^31 floats");
    sc[p] = static_cast<int>(send_counts[p]);
    sd[p] = static_cast<int>(s_at);
    rc[p] = static_cast<int>(recv_counts[p]);
    rd[p] = static_cast<int>(r_at);
    s_at += send_counts[p];
    r_at += recv_counts[p];
  }
  const int err = MPI_Alltoallv(send, sc.data(), sd.data(), MPI_FLOAT, recv, rc.data(), rd.data(), MPI_FLOAT,
                                MPI_COMM_WORLD);
  if (err != MPI_SUCCESS) throw Error("", "MPI_Alltoallv", "failed with MPI error " + std::to_string(err));
}

}  // namespace ckptdoc
