#pragma once
// One error type for every failure ckptdoc reports: it names the file, where in it, what was expected and
// what was found, so a user can act on the message without a debugger. The core throws nothing else to its
// callers (Cancelled aside, which is not a failure). Header-only constructors: the CUDA library throws it too.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace ckptdoc {

namespace error_detail {
// "file: where: what"; without a file (a request option, bytes in memory) the message starts at `where`.
inline std::string compose(const std::string& file, const std::string& where, const std::string& what) {
  std::string msg = file;
  for (const auto* part : {&where, &what})
    if (!part->empty()) msg += (msg.empty() ? "" : ": ") + *part;
  return msg;
}
}  // namespace error_detail

class Error : public std::runtime_error {
 public:
  // `where` is a human location: "offset 1234", "record 'archive/data/3'", "key 'module'".
  Error(std::string file, std::string where, std::string what)
      : std::runtime_error(error_detail::compose(file, where, what)),
        file_(std::move(file)),
        where_(std::move(where)),
        what_(std::move(what)) {}
  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  const std::string& detail() const { return what_; }
  // Returns a copy with the file name filled in when the thrower did not know it.
  Error with_file(const std::string& file) const { return file_.empty() ? Error(file, where_, what_) : *this; }

 private:
  std::string file_, where_, what_;
};

// Formats "expected X, found Y" consistently.
std::string expected_found(const std::string& expected, const std::string& found);
std::string at_offset(uint64_t offset);

}  // namespace ckptdoc
