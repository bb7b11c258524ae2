#include "ckptdoc/short_list.h"

namespace ckptdoc {

std::string short_list(const std::vector<std::string>& names, size_t most, std::string_view separator) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) {
    if (i) s += separator;
    s += names[i];
  }
  if (names.size() > most) s += " and " + std::to_string(names.size() - most) + " more";
  return s;
}

std::string joined(const std::vector<std::string>& names) {
  return short_list(names, names.size());
}

}  // namespace ckptdoc
