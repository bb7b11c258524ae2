#include "ckptdoc/appendf.h"

#include <cstdarg>
#include <cstdio>
#include <vector>

namespace ckptdoc {

void appendf(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;  // vsnprintf consumes its list: one to measure, one to write
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    std::vector<char> buf(static_cast<size_t>(n) + 1);
    std::vsnprintf(buf.data(), buf.size(), format, again);
    out.append(buf.data(), static_cast<size_t>(n));
  }
  va_end(again);
}

}  // namespace ckptdoc
