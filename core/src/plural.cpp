#include "ckptdoc/plural.h"

namespace ckptdoc {

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace ckptdoc
