#pragma once
// Whether an export of the fp32 masters would write what the model never was: the CLI refuses it without
// --force and the apps preselect the 16-bit weights, both from this one judgement of a diagnosis.
#include <optional>
#include <string>

#include "ckptdoc/analysis/report.h"

namespace ckptdoc::analysis {

// A sentence saying why the fp32 masters should not be exported (the diagnosis found them stale:
// fp32-master-mismatch, an error), or nullopt when nothing speaks against them.
std::optional<std::string> stale_masters_reason(const Report& report);

}  // namespace ckptdoc::analysis
