#include "io/path_relation.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace ckptdoc::io {

std::string normalised_path(const std::string& p) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(fs::absolute(p), ec);
  if (ec) a = fs::absolute(p).lexically_normal();
  std::string s = a.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool inside_or_equal(const std::string& child, const std::string& parent) {
  if (child == parent) return true;
  return child.size() > parent.size() && child.compare(0, parent.size(), parent) == 0 &&
         child[parent.size()] == '/';
}

}  // namespace ckptdoc::io
