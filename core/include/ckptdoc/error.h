#pragma once
// One error type for every failure ckptdoc reports: it names the file, where in it, what was expected and
// what was found, so a user can act on the message without a debugger.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace ckptdoc {

class Error : public std::runtime_error {
 public:
  // `where` is a human location: "offset 1234", "record 'archive/data/3'", "key 'module'".
  Error(std::string file, std::string where, std::string what);
  const std::string& file() const { return file_; }
  const std::string& where() const { return where_; }
  const std::string& detail() const { return what_; }
  // Returns a copy with the file name filled in when the thrower did not know it.
  Error with_file(const std::string& file) const;

 private:
  std::string file_, where_, what_;
};

// Formats "expected X, found Y" consistently.
std::string expected_found(const std::string& expected, const std::string& found);
std::string at_offset(uint64_t offset);

}  // namespace ckptdoc
