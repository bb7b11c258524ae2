#pragma once
// A count with its noun for a message: "1 param", "3 params". One spelling for every source's report.
#include <cstddef>
#include <string>

namespace ckptdoc {

// `n` and `word`, with an "s" unless n is 1 ("1 file", "0 files", "2 storage items").
std::string plural(size_t n, const std::string& word);

}  // namespace ckptdoc
