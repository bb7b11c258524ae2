// The table of one process, distributed.h's default: no MPI, and the collectives leave their data as it is.
#include "compute/single_process_table.h"

#include <cstring>

namespace ckptdoc {
namespace {

int init(int*, char***) {
  return 0;
}
void finalize() {}
int active() {
  return 0;
}
int zero() {
  return 0;
}
int one() {
  return 1;
}
int broadcast(void*, size_t, int) {
  return 0;
}
int allreduce(void*, size_t, int, int) {
  return 0;
}
int allgather(const void* mine, size_t bytes, void* all) {
  if (bytes) std::memcpy(all, mine, bytes);
  return 0;
}
int barrier() {
  return 0;
}
int alltoallv(const float* send, const size_t* send_counts, float* recv, const size_t*) {
  if (send_counts[0]) std::memcpy(recv, send, send_counts[0] * sizeof(float));
  return 0;
}

constexpr ckptdoc_mpi_table kTable{CKPTDOC_MPI_TABLE_VERSION,
                                   init,
                                   finalize,
                                   active,
                                   zero,
                                   one,
                                   zero,
                                   one,
                                   broadcast,
                                   allreduce,
                                   allgather,
                                   barrier,
                                   alltoallv};

}  // namespace

const ckptdoc_mpi_table& single_process_table() {
  return kTable;
}

}  // namespace ckptdoc
