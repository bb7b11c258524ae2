// `ckptdoc repair PATH -o OUT ...`: prints the plan, writes the repaired copy (progress on a TTY), then the
// verification. Exit 0 written and verified; 1 written, but the verification found errors or did not finish
// (the output stays, and the message says which); 2 nothing written (unusable input, usage, or a failure
// before the output was in place).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/registry.h"
#include "commands.h"
#include "device_choice.h"
#include "format_helpers.h"
#include "progress_bar.h"

namespace ckptdoc::cli {
namespace {

using nlohmann::json;

json plan_json(const repair::Plan& p) {
  json files = json::array();
  for (const auto& f : p.files)
    files.push_back({{"path", f.path}, {"action", f.action}, {"bytes", f.bytes}, {"why", f.why}});
  return {{"input", p.input},       {"output", p.output},
          {"tag", p.tag},           {"actions", p.actions},
          {"files", files},         {"changed_tensors", p.changed_tensors},
          {"warnings", p.warnings}, {"bytes_to_write", p.bytes_to_write}};
}

std::string state_name(const repair::RepairResult& r) {
  if (r.state == repair::OutputState::VerificationIncomplete) return "written-unverified";
  return r.ok() ? "written-verified" : "written-verification-failed";
}

// The JSON of a finished repair: what was written and how it was verified (or why it was not).
json result_json(const repair::RepairResult& r) {
  json j{{"plan", plan_json(r.plan)},
         {"output", r.output},
         {"state", state_name(r)},
         {"verified_clean", r.verified_clean},
         {"invariant_failures", r.invariant_failures},
         {"ok", r.ok()}};
  if (r.state == repair::OutputState::Verified)
    j["verification"] = json::parse(analysis::report_json(r.verification, r.output_catalog));
  else
    j["verification_error"] = r.verification_error;
  return j;
}

void print_unverified(const repair::RepairResult& r) {
  std::printf("\nWrote %s, but its verification did not finish: %s.\n", r.output.c_str(),
              r.verification_error.c_str());
  std::printf(
      "The output is complete and in place, but it has NOT been verified. Check it with\n"
      "  ckptdoc diagnose %s\nbefore you use it (or delete it).\n",
      r.output.c_str());
}

void print_verification(const repair::RepairResult& result, bool with_invariants = true) {
  int errors = 0, warnings = 0;
  for (const auto& f : result.verification.findings) {
    if (f.severity == analysis::Severity::Error) ++errors;
    if (f.severity == analysis::Severity::Warning) ++warnings;
    std::printf("  %s %s: %s\n", std::string(analysis::severity_name(f.severity)).c_str(), f.code.c_str(),
                f.message.c_str());
  }
  if (result.verification.findings.empty()) std::printf("  no findings\n");
  std::printf("  %d error(s), %d warning(s)\n", errors, warnings);
  if (!with_invariants) return;
  if (result.invariant_failures.empty()) {
    std::printf("  DeepSpeed loader invariants: all hold\n");
  } else {
    std::printf("  DeepSpeed loader invariants that fail:\n");
    for (const auto& m : result.invariant_failures) std::printf("    - %s\n", m.c_str());
  }
}

// How to load a weights-only output, as real DeepSpeed v0.12.6 and v0.14.5 were seen to behave
// (tests/realds): before v0.13 only fp16 has a load option that sets the masters from the weights.
std::string weights_only_load_advice(DType lp) {
  if (lp == DType::F16)
    return "Load it with engine.load_checkpoint(dir, load_module_only=True, load_optimizer_states=False): "
           "DeepSpeed "
           "then sets the fp32 masters from the fp16 weights (v0.12.6 and v0.14.5). With "
           "load_optimizer_states=False "
           "alone, versions before 0.13 keep stale masters (#762).\n";
  return "DeepSpeed v0.13+ loads it with engine.load_checkpoint(dir, load_optimizer_states=False) and sets "
         "the fp32 "
         "masters from the weights. Before v0.13 no load option does that for bf16 (the masters stay stale, "
         "#762): "
         "for those versions repair with --refresh-fp32 --reset-optimizer instead, which loads with the "
         "defaults.\n";
}

// Under mpirun: every process repairs its share; process 0 prints the plan and the outcome, and on
// node-local storage each process prints the verification of its own files. All return the same exit code.
int run_across_processes(const RepairOptions& o, const deepspeed::Checkpoint& ckpt,
                         const repair::RepairRequest& rq, const repair::Plan& plan) {
  const bool speaker = mpi_rank() == 0;
  if (o.dry_run) {
    if (speaker) {
      if (o.json)
        std::printf("%s\n", json{{"plan", plan_json(plan)}, {"dry_run", true}}.dump(1).c_str());
      else
        std::printf("%s(dry run: nothing written)\n", plan.text().c_str());
    }
    return 0;
  }
  if (speaker && !o.json) {
    std::printf("%s", plan.text().c_str());
    std::fflush(stdout);
  }
  repair::RepairResult result;
  try {
    Progress progress;
    std::optional<ProgressBar> bar;
    if (speaker) bar.emplace(progress);
    result = repair::run_repair(ckpt, o.output, rq, &progress);
  } catch (const std::exception& e) {
    if (speaker) std::fprintf(stderr, "ckptdoc repair: failed, nothing was written: %s\n", e.what());
    return 2;
  }
  const bool mine_ok = result.ok();
  ReductionArrays all_ok;
  all_ok.mins.push_back(mine_ok ? 1.0 : 0.0);
  mpi_allreduce(all_ok);
  const bool ok = all_ok.mins[0] == 1.0;
  if (o.json) {
    // One JSON document from process 0, and on node-local storage one per process for its own files.
    if (speaker || !result.verified_as_whole) {
      json j = result_json(result);
      j["process"] = mpi_rank();
      j["distribution"] = result.distribution;
      j["verified_as_whole"] = result.verified_as_whole;
      j["ok"] = ok;
      if (!speaker) j.erase("verification");
      std::printf("%s\n", j.dump(1).c_str());
    }
    return ok ? 0 : 1;
  }
  if (result.state == repair::OutputState::VerificationIncomplete) {
    if (speaker || !result.verified_as_whole) print_unverified(result);
    return 1;
  }
  if (speaker) {
    std::printf("\nWrote %s (%s)\n\nVerification (re-opened and re-diagnosed by all %d processes):\n",
                result.output.c_str(), result.distribution.c_str(), mpi_size());
    print_verification(result, result.verified_as_whole);
  }
  std::fflush(stdout);
  if (!result.verified_as_whole) {
    // Node-local storage: the loader invariants of the files this process's storage holds.
    mpi_barrier();
    if (result.invariant_failures.empty()) {
      std::printf("  [process %d] DeepSpeed loader invariants: all hold for the files on its storage (%s)\n",
                  mpi_rank(), result.output.c_str());
    } else {
      std::printf("  [process %d] DeepSpeed loader invariants that fail on its storage:\n", mpi_rank());
      for (const auto& m : result.invariant_failures) std::printf("    - %s\n", m.c_str());
    }
    std::fflush(stdout);
    mpi_barrier();
  }
  if (speaker) {
    std::printf(ok ? "\nRepair verified.\n" : "\nThe repaired checkpoint still has errors (see above).\n");
    if (ok) std::printf("Load it with %d data-parallel ranks.\n", *rq.world_size);
  }
  return ok ? 0 : 1;
}

}  // namespace

int run_repair(const RepairOptions& o) {
  if (const auto source = sources::find_source(o.path); source->repairs_itself())
    return run_source_repair(*source, o);
  repair::RepairRequest rq;
  std::shared_ptr<deepspeed::Checkpoint> ckpt;
  try {
    rq.refresh_fp32 = o.refresh_fp32;
    if (!o.lp_source.empty()) rq.lp_source = o.lp_source;
    rq.reset_optimizer = o.reset_optimizer;
    rq.drop_optimizer = o.drop_optimizer;
    rq.restore_model_files = o.restore_model_files;
    if (o.repartition) {
      if (o.world_size > 0) rq.world_size = o.world_size;
      if (!o.target.empty()) rq.target = o.target;
      if (!rq.world_size && !rq.target)
        throw Error("", "--repartition", "needs --world-size N or --target DIR");
    } else if (o.world_size > 0 || !o.target.empty()) {
      throw Error("", "--world-size/--target", "only used with --repartition");
    }
    rq.allow_shape_change = o.allow_shape_change;
    rq.device = choose_device(o.device);
    rq.force = o.force;
    rq.allow_unsafe_pickle = o.allow_unsafe_pickle;
    rq.across_processes = mpi_size() > 1;
    ckpt = deepspeed::Checkpoint::open(o.path);
    repair::Plan plan = repair::make_plan(*ckpt, o.output, rq);
    if (!rq.across_processes) {
      // Said before anything is written: errors this repair leaves in its output, and what clears them.
      analysis::DiagnoseOptions d;
      d.device = DeviceKind::Cpu;
      for (auto& line : repair::errors_left_by(deepspeed::diagnose(*ckpt, d), rq))
        plan.warnings.push_back(line);
    }
    if (rq.across_processes) {
      // Every process must get this far before any starts the collective repair.
      if (const std::string e = mpi_first_error(""); !e.empty()) {
        if (mpi_rank() == 0) std::fprintf(stderr, "ckptdoc repair: %s\n", e.c_str());
        return 2;
      }
      return run_across_processes(o, *ckpt, rq, plan);
    }
    if (o.dry_run) {
      if (o.json)
        std::printf("%s\n", json{{"plan", plan_json(plan)}, {"dry_run", true}}.dump(1).c_str());
      else
        std::printf("%s(dry run: nothing written)\n", plan.text().c_str());
      return 0;
    }
    if (!o.json) {
      std::printf("%s", plan.text().c_str());
      std::fflush(stdout);
    }
  } catch (const Error& e) {
    if (mpi_size() > 1) {
      // The others wait to hear whether every process got its plan: tell them, and let process 0 speak.
      const std::string first = mpi_first_error(e.what());
      if (mpi_rank() == 0) std::fprintf(stderr, "ckptdoc repair: %s\n", first.c_str());
      return 2;
    }
    std::fprintf(stderr, "ckptdoc repair: %s\n", e.what());
    return 2;
  }

  repair::RepairResult result;
  try {
    Progress progress;
    {
      ProgressBar bar(progress);
      result = repair::run_repair(*ckpt, o.output, rq, &progress);
    }
  } catch (const std::exception& e) {
    // run_repair throws only while the output is not in place: it is as it was.
    std::fprintf(stderr, "ckptdoc repair: failed, nothing was written: %s\n", e.what());
    return 2;
  }
  const bool ok = result.ok();
  if (o.json) {
    std::printf("%s\n", result_json(result).dump(1).c_str());
    return ok ? 0 : 1;
  }
  if (result.state == repair::OutputState::VerificationIncomplete) {
    print_unverified(result);
    return 1;
  }
  std::printf("\nWrote %s\n\nVerification (re-opened and re-diagnosed):\n", result.output.c_str());
  print_verification(result);
  std::printf(ok ? "\nRepair verified.\n" : "\nThe repaired checkpoint still has errors (see above).\n");
  if (ok && rq.drop_optimizer) std::printf("%s", weights_only_load_advice(ckpt->catalog().lp_dtype).c_str());
  if (ok && rq.world_size) std::printf("Load it with %d data-parallel ranks.\n", *rq.world_size);
  return ok ? 0 : 1;
}

}  // namespace ckptdoc::cli
