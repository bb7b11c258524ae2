#pragma once
// Processes under MPI (one per node or per GPU). With a build without MPI, or when MPI was not initialised,
// these describe a single process and the collectives leave their arguments unchanged.
#include <cstddef>

#include "ckptdoc/compute/reduction.h"

namespace ckptdoc {

// Initialises MPI when this build has it and it is not yet initialised (no-op otherwise); mpi_finalize()
// finalises it only if mpi_init() initialised it.
void mpi_init(int* argc, char*** argv);
void mpi_finalize();

bool mpi_active();  // MPI initialised and not finalised
int mpi_rank();     // 0 when not active
int mpi_size();     // 1 when not active
// This process's place among the processes on the same node (MPI_COMM_TYPE_SHARED): which GPU it takes.
int mpi_local_rank();  // 0 when not active
int mpi_local_size();  // 1 when not active

// Collectives over MPI_COMM_WORLD.
void mpi_broadcast(void* data, size_t bytes, int root);
void mpi_allreduce(ReductionArrays& a);

}  // namespace ckptdoc
