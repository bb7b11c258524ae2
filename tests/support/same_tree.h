#pragma once
// Two outputs compared byte for byte (what the app writes against what the CLI writes): the same files at
// the same relative paths, folders walked to the bottom, or two plain files.
#include <QTest>
#include <algorithm>
#include <filesystem>
#include <source_location>
#include <string>
#include <vector>

#include "test_support.h"

namespace ckptdoc::test {

// Relative paths under `root`, sorted; folders end in '/'.
inline std::vector<std::string> tree_listing(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    out.push_back(std::filesystem::relative(e.path(), root).string() + (e.is_directory() ? "/" : ""));
  std::sort(out.begin(), out.end());
  return out;
}

// The first difference between `ours` and `theirs`, by name: a path only one side has, or the first file
// whose bytes differ (and where); "" when they are the same.
inline std::string tree_difference(const std::string& ours, const std::string& theirs) {
  namespace fs = std::filesystem;
  for (const auto& p : {ours, theirs})
    if (!fs::exists(p)) return p + " does not exist";
  if (fs::is_directory(ours) != fs::is_directory(theirs))
    return ours + " and " + theirs + " are not both folders";
  const bool folders = fs::is_directory(ours);
  const auto names = folders ? tree_listing(ours) : std::vector<std::string>{""};
  if (folders) {
    const auto other = tree_listing(theirs);
    const auto [a, b] = std::mismatch(names.begin(), names.end(), other.begin(), other.end());
    if (b == other.end() || (a != names.end() && *a < *b)) {
      if (a != names.end()) return "'" + *a + "' is in " + ours + " only";
    } else {
      return "'" + *b + "' is in " + theirs + " only";
    }
  }
  for (const auto& name : names) {
    if (name.ends_with('/')) continue;
    const std::string x = read_text(folders ? ours + "/" + name : ours),
                      y = read_text(folders ? theirs + "/" + name : theirs);
    if (x == y) continue;
    const auto at = std::mismatch(x.begin(), x.end(), y.begin(), y.end()).first - x.begin();
    return "'" + (folders ? name : ours) + "' differs from " + (folders ? theirs + "/" + name : theirs) +
           " at byte " + std::to_string(at) + " (sizes " + std::to_string(x.size()) + " and " +
           std::to_string(y.size()) + ")";
  }
  return "";
}

// Fails the calling test function, at the caller's line, with tree_difference()'s message; returns whether
// the two are the same (`if (!expect_same_tree(a, b)) return;` where more checks follow).
inline bool expect_same_tree(const std::string& ours, const std::string& theirs,
                             std::source_location where = std::source_location::current()) {
  const std::string d = tree_difference(ours, theirs);
  return QTest::qVerify(d.empty(), "expect_same_tree(ours, theirs)", d.c_str(), where.file_name(),
                        static_cast<int>(where.line()));
}

}  // namespace ckptdoc::test
