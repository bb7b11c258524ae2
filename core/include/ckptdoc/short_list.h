#pragma once
// A list of names cut short for a message: "a, b, c, d, e and 7 more". One spelling for every finding that
// names a few of many tensors, files or params.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ckptdoc {

// The first `most` names, comma-separated, then " and N more" when some were left out; "" when there are
// none. Names that hold commas themselves ("w is [4, 8] on tp 0") take "; " as `separator`.
std::string short_list(const std::vector<std::string>& names, size_t most = 5,
                       std::string_view separator = ", ");

// Every name, comma-separated ("a, b, c"): for lists a message must give whole (the files a repair wrote).
std::string joined(const std::vector<std::string>& names);

}  // namespace ckptdoc
