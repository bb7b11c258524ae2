// The repairs of a legacy Megatron save and what they say (legacy_repair.h).
#include "legacy_repair.h"

#include <nlohmann/json.hpp>
#include <string>

#include "ckptdoc/error.h"
#include "ckptdoc/number_text.h"
#include "ckptdoc/plural.h"
#include "ckptdoc/request_field.h"
#include "legacy_drop.h"
#include "legacy_refresh.h"
#include "legacy_reset.h"

namespace ckptdoc::megatron_legacy {
namespace {

using nlohmann::json;
using sources::Outcome;
using sources::RepairRequest;

Outcome refresh(const RepairRequest& request) {
  const auto r = refresh_mains(request.path, request.output, request.progress);
  if (request.json)
    return {json{{"output", r.output},
                 {"mains_rewritten", r.mains},
                 {"params", r.params},
                 {"rank_files", r.rank_files},
                 {"distrib_optim", r.distrib_optim},
                 {"verified", true}}
                    .dump(2) +
                "\n",
            0};
  const std::string where =
      r.distrib_optim ? " of distrib_optim.pt's \"param\" state in " + plural(r.rank_files, "rank folder") +
                            ") from their weights: that one storage record per file rewritten in a copy (the "
                            "alignment gaps as stored), every other byte the input's"
                      : " of optimizer.fp32_from_fp16_params in " + plural(r.rank_files, "rank file") +
                            ") from their weights: one storage record each rewritten in a copy, every other "
                            "byte the input's";
  return {"Refreshed the fp32 main params of " + plural(r.params, "param") + " (" + plural(r.mains, "main") +
              where + ".\nWrote " + r.output +
              "\nVerified: every main in the copy is the exact upcast of its weight.\n",
          0};
}

Outcome reset(const RepairRequest& request) {
  const auto r = reset_optimizer(request.path, request.output, request.progress);
  if (request.json) {
    json said{{"output", r.output},
              {"action", "reset-optimizer"},
              {"rank_files", r.rank_files},
              {"distrib_optim", r.distrib_optim},
              {"moments_zeroed", r.moments},
              {"elements_zeroed", r.elements},
              {"steps_reset", r.steps},
              {"step_before", r.step_before},
              {"mains_kept", r.mains_kept},
              {"records_rewritten", r.records},
              {"verified", true}};
    // Per-param Adam states exist only in a non-distributed save; distrib_optim.pt holds flat buffers, whose
    // count is moments_zeroed, so no count of 0 is printed for them.
    if (!r.distrib_optim) said["adam_states"] = r.states;
    return {said.dump(2) + "\n", 0};
  }
  const std::string step = r.step_before == 0 ? std::string("the step already 0")
                                              : "the step " + step_text(r.step_before) + " -> 0";
  std::string text =
      r.distrib_optim
          ? "Reset the distributed optimizer of " + plural(r.rank_files, "rank folder") +
                ": distrib_optim.pt's exp_avg and exp_avg_sq zeroed (" + plural(r.moments, "buffer tensor") +
                ", " + std::to_string(r.elements) + " elements) and " + step + " in model_optim_rng.pt's " +
                plural(r.steps, "param group") +
                " (data.pkl's floats rewritten in place). Kept: distrib_optim.pt's \"param\" state (the fp32 "
                "mains, " +
                plural(r.mains_kept, "buffer") + "), the weights, param groups and args."
          : "Reset the optimizer of " + plural(r.rank_files, "rank file") + ": the Adam moments of " +
                plural(r.states, "param") + " zeroed (" + plural(r.moments, "tensor") + ", " +
                std::to_string(r.elements) + " elements) and " + step + " (" +
                plural(r.steps, "step tensor") + "). Kept: the " + plural(r.mains_kept, "fp32 main") +
                " of optimizer.fp32_from_fp16_params, the weights, param groups and args.";
  text +=
      "\n" + plural(r.records, "storage record") + " rewritten in place in a copy, every other byte the " +
      "input's.\nWrote " + r.output +
      "\nVerified: each rewritten file in the copy reads as the input's with the moments zero and the step "
      "0, nothing else changed.\n";
  return {text, 0};
}

Outcome drop(const RepairRequest& request) {
  const auto r = drop_optimizer(request.path, request.output, request.progress);
  if (request.json)
    return {json{{"output", r.output},
                 {"action", "drop-optimizer"},
                 {"rank_files", r.rank_files},
                 {"entries_dropped", r.dropped},
                 {"distrib_optim_dropped", r.distrib_optim_dropped},
                 {"bytes_before", r.bytes_before},
                 {"bytes_after", r.bytes_after},
                 {"verified", true}}
                    .dump(2) +
                "\n",
            0};
  std::string entries;
  for (size_t i = 0; i < r.dropped.size(); ++i) entries += std::string(i ? ", " : "") + r.dropped[i];
  std::string text = "Dropped the optimizer: model_optim_rng.pt of " + plural(r.rank_files, "rank folder") +
                     " written " + (entries.empty() ? std::string("as it was") : "without " + entries);
  if (r.distrib_optim_dropped)
    text += ", " + plural(r.distrib_optim_dropped, "distrib_optim.pt") + " left out";
  text += " (" + std::to_string(r.bytes_before) + " -> " + std::to_string(r.bytes_after) +
          " bytes); args, model and rng_state the input's.\nWrote " + r.output +
          "\nVerified: each rank file in the copy reads as the input's without those entries. Load it as "
          "Megatron-LM's --no-load-optim or --finetune does (the model alone, a fresh optimizer whose fp32 "
          "mains are the loaded weights).\n";
  return {text, 0};
}

}  // namespace

Outcome repair(const RepairRequest& request) {
  const int actions = int{request.refresh_fp32} + int{request.reset_optimizer} + int{request.drop_optimizer};
  if (actions != 1 || !request.other_actions.empty()) {
    std::string asked;
    for (const auto& [on, field] : {std::pair{request.refresh_fp32, "{refresh_fp32}"},
                                    std::pair{request.reset_optimizer, "{reset_optimizer}"},
                                    std::pair{request.drop_optimizer, "{drop_optimizer}"}})
      if (on && actions > 1) asked += (asked.empty() ? "" : ", ") + request_text(field);
    for (const auto& a : request.other_actions) asked += (asked.empty() ? "" : ", ") + a;
    throw Error(ErrorKind::Unsupported, request.path, asked.empty() ? "repair" : asked,
                request_text("a legacy Megatron checkpoint is repaired with {refresh_fp32} alone (the fp32 "
                             "mains from the weights), {reset_optimizer} alone (the Adam moments zeroed and "
                             "the step 0) or {drop_optimizer} alone (the optimizer left out)"));
  }
  if (request.reset_optimizer) return reset(request);
  if (request.drop_optimizer) return drop(request);
  return refresh(request);
}

}  // namespace ckptdoc::megatron_legacy
