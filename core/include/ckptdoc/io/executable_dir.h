#pragma once
// Where the running program lives: the CLI finds its siblings there (ckptdoc-gui, the MPI plug-in) instead of
// linking them.
#include <string>

namespace ckptdoc::io {

// Folder of the running executable (/proc/self/exe, links resolved); "" when it cannot be read.
std::string executable_dir();

}  // namespace ckptdoc::io
