#pragma once
// Which repair a front end may offer for a finding: only one the planner accepts on this checkpoint. A Fix
// that opens a dialog which can only refuse (a refresh blocked by moments of the wrong shape) is worse than
// none.
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/deepspeed/open_options.h"  // Checkpoint
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/repair/plan.h"

namespace ckptdoc::repair {

// The request that performs one repair kind on this checkpoint (repartition: to its own data-parallel size).
RepairRequest request_for(analysis::RepairKind kind, const model::Catalog& catalog);

// The request a finding's Fix runs: its repair kind's, with every action details["fix"] adds (settle_fixes).
RepairRequest request_for(const analysis::Finding& finding, const model::Catalog& catalog);

// Settles each finding's Fix against the planner. A repair that runs stays, with details["fix"] holding its
// flags. One that runs only together with --reset-optimizer (the moments do not fit the layout) stays too,
// with details["fix"] = "--refresh-fp32 --reset-optimizer" and the message saying so. One that cannot run at
// all is withdrawn and the message says why, in the planner's words.
void settle_fixes(const deepspeed::Checkpoint& ckpt, std::vector<analysis::Finding>& findings);

}  // namespace ckptdoc::repair
