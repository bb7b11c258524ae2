#pragma once
// printf-style formatting appended to a string: the text reports' column layouts are printf widths.
#include <string>

namespace ckptdoc {

// Appends `format` filled with the arguments to `out`; a format error appends nothing.
__attribute__((format(printf, 2, 3))) void appendf(std::string& out, const char* format, ...);

}  // namespace ckptdoc
