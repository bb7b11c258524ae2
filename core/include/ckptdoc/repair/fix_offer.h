#pragma once
// Which repair a front end may offer for a finding: only one the planner accepts on this checkpoint. A Fix
// that opens a dialog which can only refuse (a refresh blocked by moments of the wrong shape) is worse than
// none.
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/repair/plan.h"

namespace ckptdoc::repair {

// The request that performs one repair kind on this checkpoint (repartition: to its own data-parallel size).
RepairRequest request_for(analysis::RepairKind kind, const deepspeed::Catalog& catalog);

// Settles each finding's Fix against the planner. A repair that runs stays, with details["fix"] holding its
// flags. One that runs only together with --reset-optimizer (the moments do not fit the layout) is withdrawn
// from the finding (views offer Fix for one action), details["fix"] = "--refresh-fp32 --reset-optimizer" and
// the message says so. One that cannot run at all is withdrawn and the message says why, in the planner's
// words.
void settle_fixes(const deepspeed::Checkpoint& ckpt, std::vector<analysis::Finding>& findings);

}  // namespace ckptdoc::repair
