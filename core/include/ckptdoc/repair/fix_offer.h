#pragma once
// Which repair a front end may offer for a finding: only one the planner accepts on this checkpoint. A Fix
// that opens a dialog which can only refuse (a refresh blocked by moments of the wrong shape) is worse than
// none. The request a finding's Fix runs is here; the check against DeepSpeed's planner (settle_fixes) is in
// ckptdoc/sources/checkpoint/repair.h.
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/repair/plan.h"

namespace ckptdoc::repair {

// The request that performs one repair kind on this checkpoint (repartition: to its own data-parallel size).
RepairRequest request_for(analysis::RepairKind kind, const model::Catalog& catalog);

// The request a finding's Fix runs: its repair kind's, with every action details["fix"] adds (settle_fixes).
RepairRequest request_for(const analysis::Finding& finding, const model::Catalog& catalog);

}  // namespace ckptdoc::repair
