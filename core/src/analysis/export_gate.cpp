#include "ckptdoc/analysis/export_gate.h"

#include "ckptdoc/model/finding_codes.h"

namespace ckptdoc::analysis {

std::optional<std::string> stale_masters_reason(const Report& report) {
  for (const auto& f : report.findings) {
    if (f.code != model::code_name(model::Code::Fp32MasterMismatch) || f.severity != Severity::Error)
      continue;
    const size_t n = f.params.size();
    return "the fp32 master weights of " + std::to_string(n) + (n == 1 ? " param do" : " params do") +
           " not match their 16-bit weights (fp32-master-mismatch): an export of the masters writes those "
           "values, "
           "not the weights the model holds";
  }
  return std::nullopt;
}

}  // namespace ckptdoc::analysis
