#pragma once
// The C interface between ckptdoc_core and its MPI plug-in, libckptdoc_mpi.so (compute/mpi/mpi_plugin.cpp):
// the table of functions behind distributed.h. Plain C types and no exceptions cross it, so the plug-in and
// the executable share nothing but this header; `version` lets the loader refuse a plug-in of another shape
// instead of calling into it.
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKPTDOC_MPI_TABLE_VERSION 1u
#define CKPTDOC_MPI_ENTRY \
  "ckptdoc_mpi_plugin_table"  // the plug-in's one exported symbol: a ckptdoc_mpi_entry_fn

enum { CKPTDOC_MPI_U64 = 0, CKPTDOC_MPI_F64 = 1 };                       // allreduce's element types
enum { CKPTDOC_MPI_SUM = 0, CKPTDOC_MPI_MIN = 1, CKPTDOC_MPI_MAX = 2 };  // and operations

// Functions that return int return 0 or the MPI error code. The collectives are called only while active()
// with size() > 1 (compute/distributed.cpp), and with message sizes already checked to fit MPI's int counts.
struct ckptdoc_mpi_table {
  uint32_t version;                      // CKPTDOC_MPI_TABLE_VERSION
  int (*init)(int* argc, char*** argv);  // MPI_Init unless MPI is initialised already
  void (*finalize)(void);                // MPI_Finalize if init() initialised it
  int (*active)(void);                   // initialised and not finalised
  int (*rank)(void);
  int (*size)(void);
  int (*local_rank)(void);  // among the processes of this node
  int (*local_size)(void);
  int (*broadcast)(void* data, size_t bytes, int root);
  int (*allreduce)(void* data, size_t count, int type, int op);  // in place
  int (*allgather)(const void* mine, size_t bytes, void* all);
  int (*barrier)(void);
  int (*alltoallv)(const float* send, const size_t* send_counts, float* recv, const size_t* recv_counts);
};

typedef const struct ckptdoc_mpi_table* (*ckptdoc_mpi_entry_fn)(void);

#ifdef __cplusplus
}
#endif
