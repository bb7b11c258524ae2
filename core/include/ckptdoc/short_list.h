#pragma once
// A list of names cut short for a message: "a, b, c, d, e and 7 more". One spelling for every finding that
// names a few of many tensors, files or params.
#include <cstddef>
#include <string>
#include <vector>

namespace ckptdoc {

// The first `most` names, comma-separated, then " and N more" when some were left out; "" when there are
// none.
std::string short_list(const std::vector<std::string>& names, size_t most = 5);

}  // namespace ckptdoc
