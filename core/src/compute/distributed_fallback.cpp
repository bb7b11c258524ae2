// Single-process versions of distributed.h for builds without MPI (mpi/mpi_reduce.cpp replaces them).
#include "ckptdoc/compute/distributed.h"

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

}  // namespace ckptdoc
#endif
