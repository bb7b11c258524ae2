#pragma once
// `ckptdoc repair` of the sources whose optimizer is a DCP folder of torch Adam state (a DCP folder itself,
// an Accelerate save_state folder's optimizer_<i>/): the request checked, the new folder written
// (reset_optimizer.h, rewrite_records.h) and what the CLI prints.
#include <string>
#include <vector>

#include "ckptdoc/sources/source.h"

namespace ckptdoc::sources {

// Copies the folder `root` to the new folder request.output and resets the Adam state of each DCP folder of
// `parts` (relative to `root`; "." for `root` itself) in the copy; or, for a DCP folder itself (parts {"."}),
// --drop-optimizer alone writes the new folder without its optimizer.* keys (drop_optimizer.h). Refuses every
// other action by name (an Accelerate folder's --drop-optimizer is refused by its source first). `what`
// names the source in messages.
Outcome repair_dcp_optimizer(const RepairRequest& request, const std::string& root,
                             const std::vector<std::string>& parts, const std::string& what);

// Why {refresh_fp32} never applies to these sources (request_text marks; `what` names the source): their
// torch optimizer steps the saved params themselves, so no fp32 copy of the weights is saved beside them.
// What Source::repair_refusal says, for the views to leave the control off before Repair is pressed.
std::string dcp_refresh_refusal(const std::string& what);

}  // namespace ckptdoc::sources
