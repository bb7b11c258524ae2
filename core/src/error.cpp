#include "ckptdoc/error.h"

namespace ckptdoc {
namespace {
// "file: where: what"; without a file (a request option, bytes in memory) the message starts at `where`.
std::string compose(const std::string& file, const std::string& where, const std::string& what) {
  std::string msg = file;
  for (const auto* part : {&where, &what})
    if (!part->empty()) msg += (msg.empty() ? "" : ": ") + *part;
  return msg;
}
}  // namespace

Error::Error(std::string file, std::string where, std::string what)
    : std::runtime_error(compose(file, where, what)),
      file_(std::move(file)),
      where_(std::move(where)),
      what_(std::move(what)) {}

Error Error::with_file(const std::string& file) const {
  if (!file_.empty()) return *this;
  return Error(file, where_, what_);
}

std::string expected_found(const std::string& expected, const std::string& found) {
  return "expected " + expected + ", found " + found;
}

std::string at_offset(uint64_t offset) { return "offset " + std::to_string(offset); }

}  // namespace ckptdoc
