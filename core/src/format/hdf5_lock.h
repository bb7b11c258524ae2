#pragma once
// Debian's serial HDF5 library is not thread-safe: every call into it, from any module, holds this lock.
#include <mutex>

namespace ckptdoc {

std::mutex& hdf5_mutex();

}  // namespace ckptdoc
