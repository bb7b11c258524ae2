#pragma once
#include "compute/mpi_table.h"

namespace ckptdoc {

// distributed.h's functions for one process: in use until an MPI launcher makes mpi_init() load the plug-in.
const ckptdoc_mpi_table& single_process_table();

}  // namespace ckptdoc
