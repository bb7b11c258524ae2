#include "ckptdoc/error.h"

namespace ckptdoc {
namespace {
std::string compose(const std::string& file, const std::string& where, const std::string& what) {
  std::string msg = file.empty() ? std::string("<input>") : file;
  if (!where.empty()) msg += ": " + where;
  msg += ": " + what;
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
