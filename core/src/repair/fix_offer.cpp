// request_for: the request a repair kind, or a finding's Fix, runs. It names no source's files, so it stays
// in repair/; settle_fixes, which asks DeepSpeed's planner about it, is in
// sources/checkpoint/settle_fixes.cpp.
#include "ckptdoc/repair/fix_offer.h"

#include <algorithm>

namespace ckptdoc::repair {

RepairRequest request_for(analysis::RepairKind kind, const model::Catalog& catalog) {
  RepairRequest r;
  switch (kind) {
    case analysis::RepairKind::RefreshFp32:
      r.refresh_fp32 = true;
      break;
    case analysis::RepairKind::ResetOptimizer:
      r.reset_optimizer = true;
      break;
    case analysis::RepairKind::DropOptimizer:
      r.drop_optimizer = true;
      break;
    case analysis::RepairKind::Repartition:
      r.world_size = std::max(1, catalog.dp_world_size);
      break;
    case analysis::RepairKind::RestoreModelFiles:
      r.restore_model_files = true;
      break;
    case analysis::RepairKind::None:
      break;
  }
  return r;
}

RepairRequest request_for(const analysis::Finding& finding, const model::Catalog& catalog) {
  RepairRequest r = request_for(finding.repair, catalog);
  const auto fix = finding.details.find("fix");
  if (fix != finding.details.end() && fix->second.find("--reset-optimizer") != std::string::npos)
    r.reset_optimizer = true;
  return r;
}

}  // namespace ckptdoc::repair
