#pragma once
// The rules only a source can judge, from what its own files record (#27). The diagnosis's rules
// (analysis/rules.cpp) read model::Catalog and ask the catalog's SourceRules at their steps, so they never
// name a source's catalog; the DeepSpeed family's (world sizes, the fp16 loss scale, its optimizer file
// names, a universal folder's optimizer groups, the words of the stale-masters and optimizer-state findings)
// are
// sources/deepspeed/deepspeed_rules.cpp, set on every catalog it opens.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ckptdoc/model/finding.h"

namespace ckptdoc::model {

class SourceRules {
 public:
  // What stale_master_words() returns; the defaults name no framework and no repair.
  struct StaleMasterWords {
    std::string cause = "e.g. after a load that restored the weights but not the optimizer state";
    std::string fix = "with the tools of the framework that wrote the checkpoint";
  };

  // What optimizer_state_words() returns: how the source's framework saves an empty or fresh optimizer state,
  // and what its resume does with fp16 masters' moments; the defaults name no framework.
  struct OptimizerStateWords {
    // optimizer-state-empty: "... the optimizer starts fresh, as after <empty_cause>. ..."
    std::string empty_cause = "a reset or a load without optimizer states";
    // optimizer-state-fresh: "... with all-zero moments for N params, as <fresh_cause>. ..."
    std::string fresh_cause =
        "an optimizer is saved before its first real step (or after a zero-gradient step that only "
        "initialised its state) or after a load without optimizer states";
    // moments-flushed-on-resume: "(torch's Optimizer.load_state_dict converts state to its param's dtype,
    // and <cast_params> are the fp16 masters)".
    std::string cast_params = "the optimizer's params";
    // Then "... divides their exp_avg by eps alone<cast_measured>.": what a resume of the framework's own
    // files was measured to do, with its leading space; empty: nothing measured.
    std::string cast_measured;
    // And "... or without the optimizer state (<load_without_state>, which loses the moments)": the call
    // that loads so; empty: none named.
    std::string load_without_state;
    // optimizer-grafted: "... or never got a gradient. <one_step_keeper> keeps one step per group, so ...".
    std::string one_step_keeper = "The optimizer";
  };

  SourceRules() = default;
  SourceRules(const SourceRules&) = delete;
  SourceRules& operator=(const SourceRules&) = delete;
  SourceRules(SourceRules&&) = delete;
  SourceRules& operator=(SourceRules&&) = delete;
  virtual ~SourceRules() = default;

  // The files say an optimizer was used but saved none of its state: the finding that says so, reported
  // instead of judging the state. nullopt: not the case.
  virtual std::optional<Finding> optimizer_state_missing() const { return std::nullopt; }
  // Whether there is optimizer state to judge (moments and steps); false: the optimizer rules say nothing.
  virtual bool optimizer_state_saved() const { return true; }
  // The optimizer group (the params sharing one Adam step) that flat group `flat_group` belongs to: itself,
  // unless the source keeps one flat group per param.
  virtual int optimizer_group(int flat_group) const { return flat_group; }
  // The files that hold the optimizer state of these data-parallel ranks, one per rank in rank order, named
  // as the source names them (also a rank whose file is not here). Empty: the source has no such files.
  virtual std::vector<std::string> optimizer_files(const std::set<int>& /*dp_ranks*/) const { return {}; }
  // The words of the stale-masters finding (fp32-master-mismatch) that only the source's framework knows:
  // how it leaves the masters at their initial values and how they are refreshed, in "... the signature of
  // masters left at their initial values (<cause>) ... Fix: refresh the masters from the weights (<fix>)".
  virtual StaleMasterWords stale_master_words() const { return {}; }
  // The words of the optimizer-state findings that only the source's framework knows (OptimizerStateWords).
  virtual OptimizerStateWords optimizer_state_words() const { return {}; }
  // The framework's setting that saves the masters in 16 bits (masters-in-16-bit: "... saved in bfloat16, not
  // float32 (<setting>): ..."), `bf16` for bfloat16 masters, else float16. Empty: none named.
  virtual std::string masters_in_16bit_setting(bool /*bf16*/) const { return {}; }
  // After the rules on values: the findings from the source's own records alone (world sizes, a loss scale),
  // appended to `out`, which holds the findings so far (a finding already there is not repeated).
  virtual void record_rules(std::vector<Finding>& /*out*/) const {}
};

}  // namespace ckptdoc::model
