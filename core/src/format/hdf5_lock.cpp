#include "format/hdf5_lock.h"

namespace ckptdoc {

std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace ckptdoc
