#include "ckptdoc/error.h"

namespace ckptdoc {

std::string expected_found(const std::string& expected, const std::string& found) {
  return "expected " + expected + ", found " + found;
}

std::string at_offset(uint64_t offset) {
  return "offset " + std::to_string(offset);
}

}  // namespace ckptdoc
