// libckptdoc_mpi.so: distributed.h's table over MPI_COMM_WORLD, loaded by mpi_init() under an MPI launcher
// (compute/mpi_plugin_loader.cpp). Only this library links MPI. It returns MPI error codes and never throws:
// compute/distributed.cpp turns them into ckptdoc::Error.
// The C API only: Open MPI's mpi.h otherwise drags in its deprecated C++ bindings (MPI::Comm, ...).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "compute/mpi_table.h"

namespace {

bool g_we_initialised = false;
MPI_Comm g_node = MPI_COMM_NULL;  // the processes sharing this node, made on first use

MPI_Comm node_comm() {
  if (g_node == MPI_COMM_NULL)
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &g_node);
  return g_node;
}

int active() {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  return inited && !finalized;
}

int init(int* argc, char*** argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return MPI_SUCCESS;
  const int rc = MPI_Init(argc, argv);
  g_we_initialised = rc == MPI_SUCCESS;
  return rc;
}

void finalize() {
  if (g_we_initialised && active()) {
    if (g_node != MPI_COMM_NULL) MPI_Comm_free(&g_node);
    MPI_Finalize();
  }
  g_we_initialised = false;
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}
int local_rank() {
  int r = 0;
  MPI_Comm_rank(node_comm(), &r);
  return r;
}
int local_size() {
  int s = 1;
  MPI_Comm_size(node_comm(), &s);
  return s;
}

int broadcast(void* data, size_t bytes, int root) {
  return MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
}

// In place; MPI counts are int, so long arrays go in chunks.
int allreduce(void* data, size_t count, int type, int op) {
  const MPI_Datatype t = type == CKPTDOC_MPI_U64 ? MPI_UINT64_T : MPI_DOUBLE;
  const MPI_Op o = op == CKPTDOC_MPI_MIN ? MPI_MIN : op == CKPTDOC_MPI_MAX ? MPI_MAX : MPI_SUM;
  const size_t element = type == CKPTDOC_MPI_U64 ? sizeof(uint64_t) : sizeof(double);
  constexpr size_t kChunk = size_t{1} << 28;
  for (size_t at = 0; at < count; at += kChunk) {
    const size_t n = std::min(kChunk, count - at);
    const int rc = MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * element, static_cast<int>(n),
                                 t, o, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int allgather(const void* mine, size_t bytes, void* all) {
  return MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE,
                       MPI_COMM_WORLD);
}

int barrier() {
  return MPI_Barrier(MPI_COMM_WORLD);
}

// The caller checked that each side's total fits an int.
int alltoallv(const float* send, const size_t* send_counts, float* recv, const size_t* recv_counts) {
  const size_t procs = static_cast<size_t>(size());
  std::vector<int> sc(procs), sd(procs), rc(procs), rd(procs);
  int s_at = 0, r_at = 0;
  for (size_t p = 0; p < procs; ++p) {
    sc[p] = static_cast<int>(send_counts[p]);
    sd[p] = s_at;
    rc[p] = static_cast<int>(recv_counts[p]);
    rd[p] = r_at;
    s_at += sc[p];
    r_at += rc[p];
  }
  return MPI_Alltoallv(send, sc.data(), sd.data(), MPI_FLOAT, recv, rc.data(), rd.data(), MPI_FLOAT,
                       MPI_COMM_WORLD);
}

constexpr ckptdoc_mpi_table kTable{CKPTDOC_MPI_TABLE_VERSION,
                                   init,
                                   finalize,
                                   active,
                                   rank,
                                   size,
                                   local_rank,
                                   local_size,
                                   broadcast,
                                   allreduce,
                                   allgather,
                                   barrier,
                                   alltoallv};

}  // namespace

extern "C" __attribute__((visibility("default"))) const ckptdoc_mpi_table* ckptdoc_mpi_plugin_table() {
  return &kTable;
}
