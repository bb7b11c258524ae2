#pragma once
// Merging statistics across MPI processes (one per node or per GPU). With a build without MPI, or when MPI
// was not initialised, these describe a single process and the reductions leave their argument unchanged.
#include "ckptdoc/compute/statistics.h"

namespace ckptdoc {

// Initialises MPI when this build has it and it is not yet initialised (no-op otherwise); mpi_finalize()
// finalises it only if mpi_init() initialised it.
void mpi_init(int* argc, char*** argv);
void mpi_finalize();

bool mpi_active();  // MPI initialised and not finalised
int mpi_rank();     // 0 when not active
int mpi_size();     // 1 when not active

// Collective over MPI_COMM_WORLD: counts and sums add up, max_abs/max take the maximum, min the minimum
// (over processes with finite values). Every process gets the merged result.
void mpi_allreduce_stats(ValueStats& s);
void mpi_allreduce_divergence(DivergenceStats& s);

}  // namespace ckptdoc
