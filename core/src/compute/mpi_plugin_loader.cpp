#include "compute/mpi_plugin_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "ckptdoc/io/executable_dir.h"

namespace ckptdoc {
namespace {

std::vector<std::string> candidates() {
  const std::filesystem::path dir = io::executable_dir();
  if (dir.empty()) return {};
  return {dir / kMpiPluginName, dir.parent_path() / "lib" / "ckptdoc" / kMpiPluginName};
}

// The table of the plug-in at `path`, or nullptr with `why` said.
const ckptdoc_mpi_table* try_load(const std::string& path, std::string& why) {
  // RTLD_GLOBAL: Open MPI dlopens its own components, which expect libmpi's symbols to be global.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    const char* err = dlerror();
    why = err ? err : path + ": dlopen failed";
    return nullptr;
  }
  // Stays loaded for the life of the process: MPI cannot be initialised twice, so it is never unloaded.
  const auto entry = reinterpret_cast<ckptdoc_mpi_entry_fn>(dlsym(lib, CKPTDOC_MPI_ENTRY));
  if (!entry) {
    why = path + ": has no " + CKPTDOC_MPI_ENTRY;
    return nullptr;
  }
  const ckptdoc_mpi_table* table = entry();
  if (!table || table->version != CKPTDOC_MPI_TABLE_VERSION) {
    why = path + ": table version " + (table ? std::to_string(table->version) : "(none)") +
          ", this ckptdoc wants " + std::to_string(CKPTDOC_MPI_TABLE_VERSION) +
          " (a plug-in from another build)";
    return nullptr;
  }
  return table;
}

}  // namespace

const char* mpi_launcher_variable() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return v;
  return nullptr;
}

const ckptdoc_mpi_table* load_mpi_plugin(std::string& why) {
  why.clear();
  for (const std::string& path : candidates()) {
    std::string failed;
    if (const ckptdoc_mpi_table* t = try_load(path, failed)) return t;
    why += (why.empty() ? "" : "; ") + failed;
  }
  if (why.empty()) why = "the folder of this executable is unknown (/proc/self/exe)";
  return nullptr;
}

}  // namespace ckptdoc
