#pragma once
// Repairs of a DeepSpeed checkpoint: a plan computed from the checkpoint and the requested actions, printable
// before anything is written (dry run), then executed into a new folder (the input is never modified) and
// verified by re-opening and re-diagnosing the output.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/deepspeed/open_options.h"  // Checkpoint
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::repair {

struct RepairRequest {
  bool refresh_fp32 = false;             // fp32 masters := upcast(lp weights)
  std::optional<std::string> lp_source;  // ZeRO-3: a consolidated weights file holding the lp weights
  bool reset_optimizer = false;          // keep weights and masters; empty Adam state, step 0
  bool drop_optimizer = false;           // weights-only DeepSpeed checkpoint (no optim files)
  // ZeRO-3: the model files of ranks that lack one written as copies of another rank's (a ZeRO-3 job's ranks
  // save the same model file); everything else copied as it is. For DeepSpeed #7546 (rank 0's model file
  // alone).
  bool restore_model_files = false;
  std::optional<int> world_size;      // repartition for a new data-parallel size
  std::optional<std::string> target;  // repartition onto a template checkpoint's layout
  bool allow_shape_change = false;
  DeviceKind device = DeviceKind::Auto;
  bool force = false;  // replace an output folder that holds a DeepSpeed checkpoint
  // Copy or rewrite files whose pickles would run code under torch.load (unsafe-pickle errors); refused
  // otherwise.
  bool allow_unsafe_pickle = false;
  // Under mpirun with several processes (--world-size only): every process runs the repair; each reads the
  // old rank files in its own checkpoint folder (shared or node-local storage), slices move between
  // processes (NCCL or MPI), and each writes the new ranks it owns. Rank files missing from one process's
  // folder are then expected.
  bool across_processes = false;
  // Only judging whether a fix could run (repair::settle_fixes under mpirun): the merged diagnosis found
  // every rank file, so those missing from this node's folder are on another one.
  bool rank_files_elsewhere = false;
};

// The request with its lp source settled: --lp-source when given; else, for a ZeRO-3 refresh of a Hugging
// Face Trainer / Accelerate checkpoint-N/ folder, the model weights the Trainer saved beside `latest` and
// global_stepN/.
RepairRequest with_default_lp_source(const deepspeed::Checkpoint& ckpt, RepairRequest rq);

struct PlannedFile {
  std::string path;    // relative to the output save folder, e.g. "global_step5/mp_rank_00_model_states.pt"
  std::string action;  // "copy" | "rewrite" | "write" | "link"
  uint64_t bytes = 0;  // expected size
  std::string why;
};

struct Plan {
  std::string input, output;
  bool output_existed =
      false;  // a folder was at `output` when planned: only then does publishing replace one
  std::string tag;
  std::vector<std::string> actions;  // human lines: "refresh fp32 masters of 2 groups on 2 ranks", ...
  std::vector<PlannedFile> files;
  std::vector<std::string> changed_tensors;  // e.g. "rank 0 single_partition_of_fp32_groups[1]"
  std::vector<std::string> warnings;         // e.g. params dropped by a graft
  // --restore-model-files: the data-parallel ranks whose model file is written, each as a copy of
  // `restore_from`'s (decided once here, so the run writes what the plan printed).
  std::vector<int> restored_ranks;
  int restore_from = -1;
  uint64_t bytes_to_write = 0;
  std::string text() const;  // printable summary
};

// The error findings of `input` (the diagnosis of the checkpoint to repair) that the requested actions leave
// in place, each as a line naming the finding and the action that clears it ("fp32-master-mismatch stays:
// ...; run
// --refresh-fp32 first"), so a plan says before anything is written that its output will still have errors.
std::vector<std::string> errors_left_by(const analysis::Report& input, const RepairRequest& request);

// What a repair did to the output, as every front end must tell it. (Not written at all: run_repair threw,
// and the output is as it was before.)
enum class OutputState : uint8_t {
  Verified,  // written, then re-opened, re-diagnosed and checked against DeepSpeed's loader invariants
  VerificationIncomplete,  // written and complete in place, but its verification did not finish: unverified
};

struct RepairResult {
  Plan plan;
  std::string output;
  OutputState state = OutputState::Verified;
  std::string verification_error;       // VerificationIncomplete: why ("cancelled", an error message)
  bool verification_cancelled = false;  // VerificationIncomplete because the user cancelled it
  analysis::Report verification;        // diagnosis of the written output (Verified only)
  model::Catalog output_catalog;        // the output as re-opened (Verified only)
  bool verified_clean = false;          // no error-level finding in the output
  std::vector<std::string>
      invariant_failures;  // deepspeed-format.md §6.4 checks that failed (empty = all hold)
  // across_processes: how the work was shared, and whether every process sees every output file (shared
  // storage). The verification diagnosis always covers all ranks (each process reads those it sees); the
  // loader invariants cover the whole output only then, else each storage's files.
  std::string distribution;  // e.g. "2 processes over MPI (2 processes); 1.2 MB exchanged; this process wrote
                             // ranks 0-1"
  bool verified_as_whole = true;
  // Written, verified, no error finding, every loader invariant holds.
  bool ok() const { return state == OutputState::Verified && verified_clean && invariant_failures.empty(); }
};

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

}  // namespace ckptdoc::repair
