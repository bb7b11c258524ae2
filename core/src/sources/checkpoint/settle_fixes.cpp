// settle_fixes: each finding's Fix judged by DeepSpeed's planner (make_plan), so it lives with DeepSpeed's
// source; the request a Fix runs (request_for) is repair/'s.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>

#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/repair/fix_offer.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::repair {

namespace {

// The planner's refusal of a request, or nothing when it would plan it. The output is a folder that does not
// exist (its parent neither), so only the checkpoint and the request are judged; make_plan writes nothing.
std::optional<std::string> refusal(const deepspeed::Checkpoint& ckpt, const RepairRequest& rq) {
  const std::string probe =
      ckpt.catalog().save_dir + ".ckptdoc-fix-probe-" + std::to_string(::getpid()) + "/output";
  try {
    (void)make_plan(ckpt, probe, rq);
    return std::nullopt;
  } catch (const Error& e) {
    return e.detail().empty() ? std::string(e.what()) : e.detail();
  }
}

std::string flags_of(const RepairRequest& rq) {
  std::string s;
  auto add = [&s](const char* f) { s += (s.empty() ? "" : " ") + std::string(f); };
  if (rq.refresh_fp32) add("--refresh-fp32");
  if (rq.reset_optimizer) add("--reset-optimizer");
  if (rq.drop_optimizer) add("--drop-optimizer");
  if (rq.restore_model_files) add("--restore-model-files");
  if (rq.world_size)
    s += (s.empty() ? "" : " ") + std::string("--repartition --world-size ") + std::to_string(*rq.world_size);
  return s;
}

}  // namespace

void settle_fixes(const deepspeed::Checkpoint& ckpt, std::vector<analysis::Finding>& findings) {
  // A diagnosis merged over node-local storage (mpirun) names no rank file missing although this node lacks
  // some.
  const bool none_missing = std::none_of(findings.begin(), findings.end(), [](const analysis::Finding& f) {
    return f.code == model::code_name(model::Code::RankFileMissing);
  });
  auto probe_request = [&](analysis::RepairKind k) {
    RepairRequest rq = request_for(k, ckpt.catalog());
    rq.rank_files_elsewhere = none_missing;
    return rq;
  };
  // Several findings share a kind: ask the planner once per kind.
  std::map<analysis::RepairKind, std::optional<std::string>> judged;
  auto judge = [&](analysis::RepairKind k) -> const std::optional<std::string>& {
    auto it = judged.find(k);
    if (it == judged.end()) it = judged.emplace(k, refusal(ckpt, probe_request(k))).first;
    return it->second;
  };
  for (auto& f : findings) {
    if (f.repair == analysis::RepairKind::None) continue;
    // A ZeRO-3 refresh reads the 16-bit weights the user names (--lp-source) or the ones beside the
    // checkpoint: which ones is the user's call, not this check's.
    if (f.repair == analysis::RepairKind::RefreshFp32 &&
        ckpt.catalog().wrapper == deepspeed::OptimizerWrapper::Zero3)
      continue;
    const RepairRequest alone = probe_request(f.repair);
    const auto& why = judge(f.repair);
    if (!why) {
      f.details["fix"] = flags_of(alone);
      continue;
    }
    if (alone.refresh_fp32) {
      RepairRequest both = alone;
      both.reset_optimizer = true;
      if (!refusal(ckpt, both)) {  // the Fix stays and runs both (request_for(finding))
        f.details["fix"] = flags_of(both);
        f.message +=
            " The refresh runs only together with a reset of the optimizer here (the moments do not fit "
            "the layout): ckptdoc repair " +
            flags_of(both) + ".";
        continue;
      }
    }
    f.repair = analysis::RepairKind::None;
    f.message += " No repair runs on this checkpoint as it is: " + *why;
  }
}

}  // namespace ckptdoc::repair
