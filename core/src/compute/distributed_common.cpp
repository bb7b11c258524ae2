// Helpers built on distributed.h's collectives, the same for builds with and without MPI.
#include <cstdint>
#include <vector>

#include "ckptdoc/compute/distributed.h"

namespace ckptdoc {

std::string mpi_first_error(const std::string& mine) {
  const int procs = mpi_size();
  if (procs == 1) return mine;
  const int failed = mine.empty() ? 0 : 1;
  std::vector<int> all(static_cast<size_t>(procs));
  mpi_allgather(&failed, sizeof failed, all.data());
  int root = -1;
  for (int p = 0; p < procs && root < 0; ++p)
    if (all[static_cast<size_t>(p)]) root = p;
  if (root < 0) return "";
  uint64_t len = mpi_rank() == root ? mine.size() : 0;
  mpi_broadcast(&len, sizeof len, root);
  std::string msg(len, '\0');
  if (mpi_rank() == root) msg = mine;
  mpi_broadcast(msg.data(), msg.size(), root);
  return "process " + std::to_string(root) + ": " + msg;
}

}  // namespace ckptdoc
