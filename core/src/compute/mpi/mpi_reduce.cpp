// MPI versions of distributed.h over MPI_COMM_WORLD.
// The C API only: Open MPI's mpi.h otherwise drags in its deprecated C++ bindings (MPI::Comm, ...).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
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

}  // namespace ckptdoc
