#include "ckptdoc/short_list.h"

namespace ckptdoc {

std::string short_list(const std::vector<std::string>& names, size_t most) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > most) s += " and " + std::to_string(names.size() - most) + " more";
  return s;
}

}  // namespace ckptdoc
