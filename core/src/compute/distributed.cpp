// distributed.h through a table of functions: one process's (single_process_table.cpp) until mpi_init() under
// an MPI launcher swaps in the MPI plug-in's. Checks and errors are made here, so the plug-in stays plain C.
#include "ckptdoc/compute/distributed.h"

#include <climits>
#include <string>

#include "ckptdoc/error.h"
#include "compute/mpi_plugin_loader.h"
#include "compute/single_process_table.h"

namespace ckptdoc {
namespace {

const ckptdoc_mpi_table* g_plugin = nullptr;  // the MPI plug-in's table, from mpi_init() to mpi_finalize()
const ckptdoc_mpi_table& table() {
  return g_plugin ? *g_plugin : single_process_table();
}

void check(int rc, const char* call) {
  if (rc != 0) throw Error(ErrorKind::Device, "", call, "failed with MPI error " + std::to_string(rc));
}
void check_int_count(size_t bytes, const char* call) {
  if (bytes > static_cast<size_t>(INT_MAX))
    throw Error(ErrorKind::Device, "", call, "message of " + std::to_string(bytes) + " bytes");
}
// The collectives go to MPI only when there is another process to talk to.
const ckptdoc_mpi_table& collectives() {
  return mpi_size() > 1 ? table() : single_process_table();
}
bool over_mpi(const ckptdoc_mpi_table& t) {
  return &t != &single_process_table();
}

#ifdef CKPTDOC_HAVE_MPI
constexpr const char* kNoPluginHint = "A build with MPI makes it beside ckptdoc (target ckptdoc_mpi)";
#else
constexpr const char* kNoPluginHint =
    "This ckptdoc was built without MPI: configure it where MPI is installed";
#endif

}  // namespace

void mpi_init(int* argc, char*** argv) {
  const char* launcher = mpi_launcher_variable();
  if (!launcher || g_plugin) return;
  // Under a launcher every process running alone would each do the whole job and merge nothing: refuse.
  std::string why;
  const ckptdoc_mpi_table* plugin = load_mpi_plugin(why);
  if (!plugin)
    throw Error(ErrorKind::Device, "", "MPI",
                std::string("started by an MPI launcher (") + launcher + " is set) but the MPI plug-in " +
                    kMpiPluginName + " could not be loaded: " + why + ". " + kNoPluginHint +
                    "; without the launcher ckptdoc runs as one process");
  check(plugin->init(argc, argv), "MPI_Init");
  g_plugin = plugin;
}

void mpi_finalize() {
  table().finalize();
  g_plugin = nullptr;
}

bool mpi_active() {
  return table().active() != 0;
}
int mpi_rank() {
  return mpi_active() ? table().rank() : 0;
}
int mpi_size() {
  return mpi_active() ? table().size() : 1;
}
int mpi_local_rank() {
  return mpi_active() ? table().local_rank() : 0;
}
int mpi_local_size() {
  return mpi_active() ? table().local_size() : 1;
}

void mpi_broadcast(void* data, size_t bytes, int root) {
  const ckptdoc_mpi_table& t = collectives();
  if (over_mpi(t)) check_int_count(bytes, "MPI_Bcast");
  check(t.broadcast(data, bytes, root), "MPI_Bcast");
}

void mpi_allreduce(ReductionArrays& a) {
  const ckptdoc_mpi_table& t = collectives();
  check(t.allreduce(a.counts.data(), a.counts.size(), CKPTDOC_MPI_U64, CKPTDOC_MPI_SUM), "MPI_Allreduce");
  check(t.allreduce(a.sums.data(), a.sums.size(), CKPTDOC_MPI_F64, CKPTDOC_MPI_SUM), "MPI_Allreduce");
  check(t.allreduce(a.mins.data(), a.mins.size(), CKPTDOC_MPI_F64, CKPTDOC_MPI_MIN), "MPI_Allreduce");
  check(t.allreduce(a.maxs.data(), a.maxs.size(), CKPTDOC_MPI_F64, CKPTDOC_MPI_MAX), "MPI_Allreduce");
}

void mpi_allgather(const void* mine, size_t bytes, void* all) {
  const ckptdoc_mpi_table& t = collectives();
  if (over_mpi(t)) check_int_count(bytes, "MPI_Allgather");
  check(t.allgather(mine, bytes, all), "MPI_Allgather");
}

void mpi_barrier() {
  check(collectives().barrier(), "MPI_Barrier");
}

void mpi_alltoallv(const float* send, const size_t* send_counts, float* recv, const size_t* recv_counts) {
  const ckptdoc_mpi_table& t = collectives();
  if (over_mpi(t)) {
    // MPI counts and displacements are int: callers keep a round under 2^31 floats in all.
    size_t sent = 0, received = 0;
    for (int p = 0; p < mpi_size(); ++p) {
      sent += send_counts[p];
      received += recv_counts[p];
    }
    if (sent > static_cast<size_t>(INT_MAX) || received > static_cast<size_t>(INT_MAX))
      throw Error(ErrorKind::Unsupported, "", "MPI_Alltoallv", "a round of more than 2^31 floats");
  }
  check(t.alltoallv(send, send_counts, recv, recv_counts), "MPI_Alltoallv");
}

}  // namespace ckptdoc
