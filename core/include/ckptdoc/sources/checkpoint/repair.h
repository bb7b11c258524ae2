#pragma once
// The repair of a DeepSpeed checkpoint: the planner, the runner, the check of DeepSpeed's loader invariants
// on what was written and the settling of a diagnosis's Fixes against the planner. Each reads DeepSpeed's
// catalog and rank files, so they live with DeepSpeed's source (core/src/sources/checkpoint/, library
// ckptdoc_source_checkpoint) and repair/ keeps only what names no source's files: the request, plan and
// result types (ckptdoc/repair/plan.h), the request a Fix runs (fix_offer.h) and the publish of an output
// folder.
//
// Namespace: ckptdoc::repair, as before the move (and as run_repair already was here). The names say what is
// done (repair::make_plan, repair::run_repair), this header's folder says for which source, and every caller
// changes only an include line; a second source's planner would get its own header beside its source.
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/deepspeed/open_options.h"  // Checkpoint
#include "ckptdoc/task/progress.h"

namespace ckptdoc::repair {

// The request with its lp source settled: --lp-source when given; else, for a ZeRO-3 refresh of a Hugging
// Face Trainer / Accelerate checkpoint-N/ folder, the model weights the Trainer saved beside `latest` and
// global_stepN/.
RepairRequest with_default_lp_source(const deepspeed::Checkpoint& ckpt, RepairRequest rq);

// Validates the request against the checkpoint and computes the plan. Throws ckptdoc::Error for
// impossible requests (e.g. refresh on ZeRO-3 without an lp source) with a message saying why.
Plan make_plan(const deepspeed::Checkpoint& ckpt, const std::string& output, const RepairRequest& request);

// Executes a plan: writes into a temporary folder beside `output`, fsyncs, renames it into place (`latest`
// written last), then re-opens and re-diagnoses it. Throws (Error, Cancelled) only when nothing was written:
// the output is then as it was. Once the output is in place it returns, whatever happens to the verification
// (a cancel or an error there gives OutputState::VerificationIncomplete, and the output stays).
RepairResult run_repair(const deepspeed::Checkpoint& ckpt, const std::string& output,
                        const RepairRequest& request, Progress* progress = nullptr,
                        FileIo& io = current_io());

// The loader invariants of deepspeed-format.md §6.4 checked on a written checkpoint; empty when all hold.
// only_present_files: a node's share of a checkpoint on node-local storage; rank files that are not there
// are not counted as missing, and the ones there are checked in full.
std::vector<std::string> check_loader_invariants(const deepspeed::Checkpoint& ckpt,
                                                 bool only_present_files = false);

// Settles each finding's Fix against the planner. A repair that runs stays, with details["fix"] holding its
// flags. One that runs only together with --reset-optimizer (the moments do not fit the layout) stays too,
// with details["fix"] = "--refresh-fp32 --reset-optimizer" and the message saying so. One that cannot run at
// all is withdrawn and the message says why, in the planner's words.
void settle_fixes(const deepspeed::Checkpoint& ckpt, std::vector<analysis::Finding>& findings);

}  // namespace ckptdoc::repair
