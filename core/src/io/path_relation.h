#pragma once
// Where two paths stand to each other, for outputs that must not land inside their input (or be it).
#include <string>

namespace ckptdoc::io {

// Absolute, symlinks resolved as far as the path exists, no trailing '/'.
std::string normalised_path(const std::string& p);

// Whether `child` is `parent` or lies below it (both normalised).
bool inside_or_equal(const std::string& child, const std::string& parent);

}  // namespace ckptdoc::io
