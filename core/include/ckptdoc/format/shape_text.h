#pragma once
// A tensor's shape for people: "[64, 32]", "[]" for a scalar. One spelling for every command, finding and
// view.
#include <cstdint>
#include <string>
#include <vector>

namespace ckptdoc {

std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace ckptdoc
