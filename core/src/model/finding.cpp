#include "ckptdoc/model/finding.h"

#include <utility>

namespace ckptdoc::model {

Finding::Finding(Code c, std::string msg, std::string f, std::vector<int> r, std::vector<std::string> p)
    : Finding(c, default_severity(c), std::move(msg), std::move(f), std::move(r), std::move(p)) {}

Finding::Finding(Code c, Severity s, std::string msg, std::string f, std::vector<int> r,
                 std::vector<std::string> p)
    : code(code_name(c)),
      severity(s),
      message(std::move(msg)),
      file(std::move(f)),
      params(std::move(p)),
      ranks(std::move(r)),
      repair(default_repair(c)) {}

std::vector<std::string> Finding::named_files() const {
  std::vector<std::string> out;
  if (!file.empty()) out.push_back(file);
  out.insert(out.end(), files.begin(), files.end());
  return out;
}

}  // namespace ckptdoc::model
