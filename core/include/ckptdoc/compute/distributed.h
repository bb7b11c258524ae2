#pragma once
// Processes under MPI (one per node or per GPU). MPI lives in a plug-in, libckptdoc_mpi.so, that mpi_init()
// loads under an MPI launcher; until then (and without a launcher) these describe a single process and the
// collectives leave their arguments unchanged.
#include <cstddef>
#include <string>

#include "ckptdoc/compute/reduction.h"

namespace ckptdoc {

// Under an MPI launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or MV2_COMM_WORLD_SIZE set): loads the
// plug-in from beside the executable or ../lib/ckptdoc and initialises MPI unless it is already; throws
// ckptdoc::Error, naming the paths tried and why, when the plug-in does not load (processes that each ran
// alone would each do the whole job). Without a launcher, a no-op. mpi_finalize() finalises MPI only if
// mpi_init() initialised it.
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
// `bytes` from every process into `all` (process p's at all + p * bytes).
void mpi_allgather(const void* mine, size_t bytes, void* all);
void mpi_barrier();
// Every process sends send_counts[p] floats to process p (back to back in `send`, in process order) and
// receives recv_counts[p] floats from p into `recv`; the counts must match pairwise.
void mpi_alltoallv(const float* send, const size_t* send_counts, float* recv, const size_t* recv_counts);

// Collective failure agreement: every process passes its own error ("" when it succeeded) and gets ""
// when all succeeded, else the lowest failing process's error prefixed with "process N: " (when there are
// several processes), so that all stop together instead of some waiting in the next collective.
std::string mpi_first_error(const std::string& mine);

}  // namespace ckptdoc
