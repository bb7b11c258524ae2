#pragma once
// Finding and loading libckptdoc_mpi.so, so that the ckptdoc executable itself never links MPI.
#include <string>

#include "compute/mpi_table.h"

namespace ckptdoc {

inline constexpr const char* kMpiPluginName = "libckptdoc_mpi.so";

// The environment variable through which an MPI launcher (mpirun, srun, mpiexec) announced itself, or nullptr
// when this process was started without one.
const char* mpi_launcher_variable();

// Loads the plug-in from beside the executable, else from ../lib/ckptdoc (an install), and returns its table;
// nullptr when none loads, with `why` naming each path tried and what failed (dlerror, a table of another
// version).
const ckptdoc_mpi_table* load_mpi_plugin(std::string& why);

}  // namespace ckptdoc
