// errors_left_by: which error findings a requested repair does not clear (see plan.h).
#include <set>

#include "ckptdoc/repair/plan.h"

namespace ckptdoc::repair {

std::vector<std::string> errors_left_by(const analysis::Report& input, const RepairRequest& rq) {
  using analysis::RepairKind;
  std::set<RepairKind> cleared;
  if (rq.refresh_fp32) cleared.insert(RepairKind::RefreshFp32);
  if (rq.reset_optimizer) cleared.insert(RepairKind::ResetOptimizer);
  if (rq.drop_optimizer)
    cleared.insert({RepairKind::DropOptimizer, RepairKind::ResetOptimizer});  // no state left
  if (rq.world_size || rq.target) cleared.insert(RepairKind::Repartition);
  if (rq.restore_model_files) cleared.insert(RepairKind::RestoreModelFiles);
  std::vector<std::string> left;
  std::set<std::string> said;
  for (const auto& f : input.findings) {
    if (f.severity != analysis::Severity::Error || cleared.count(f.repair) || !said.insert(f.code).second)
      continue;
    std::string line = f.code + " (error) stays in the output: ";
    if (f.repair == RepairKind::None)
      line += "no repair clears it (see its message in ckptdoc diagnose)";
    else
      line += "this repair does not change what it is about; --" +
              std::string(analysis::repair_name(f.repair)) + " clears it (run that first, or instead)";
    left.push_back(std::move(line));
  }
  return left;
}

}  // namespace ckptdoc::repair
