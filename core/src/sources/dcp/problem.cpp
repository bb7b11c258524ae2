#include <utility>

#include "ckptdoc/sources/dcp/diagnose.h"

namespace ckptdoc::dcp {

Problem problem(model::Code code, std::string message, std::string file, std::string key) {
  return problem(code, model::default_severity(code), std::move(message), std::move(file), std::move(key));
}

Problem problem(model::Code code, model::Severity severity, std::string message, std::string file,
                std::string key) {
  Problem p(code, severity, std::move(message), std::move(file));
  p.key = std::move(key);
  return p;
}

}  // namespace ckptdoc::dcp
