#include "ckptdoc/number_text.h"

#include <cstdio>

namespace ckptdoc {

std::string three_significant_digits(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

std::string two_digits(int v) {
  char b[16];
  std::snprintf(b, sizeof b, "%02d", v);
  return b;
}

}  // namespace ckptdoc
