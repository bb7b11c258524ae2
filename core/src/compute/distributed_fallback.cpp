// Single-process versions of distributed.h for builds without MPI (mpi/mpi_reduce.cpp replaces them).
#include "ckptdoc/compute/distributed.h"

#include <cstring>

#ifndef CKPTDOC_HAVE_MPI
namespace ckptdoc {

void mpi_init(int*, char***) {}
void mpi_finalize() {}
bool mpi_active() { return false; }
int mpi_rank() { return 0; }
int mpi_size() { return 1; }
int mpi_local_rank() { return 0; }
int mpi_local_size() { return 1; }
void mpi_broadcast(void*, size_t, int) {}
void mpi_allreduce(ReductionArrays&) {}
void mpi_allgather(const void* mine, size_t bytes, void* all) {
  if (bytes) std::memcpy(all, mine, bytes);
}
void mpi_barrier() {}
void mpi_alltoallv(const float* send, const size_t* send_counts, float* recv, const size_t*) {
  if (send_counts[0]) std::memcpy(recv, send, send_counts[0] * sizeof(float));
}

}  // namespace ckptdoc
#endif
