#pragma once
// What a repair is asked to do, the plan it prints before anything is written (dry run) and what it tells of
// its output: the types every front end shows. They name no source's files; the planner and the runner that
// fill them for DeepSpeed's checkpoints live with that source (ckptdoc/sources/checkpoint/repair.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/model/catalog.h"

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

// The `why` of a file the repair copies as it is because the loader does not read it; Plan::text() sums many
// such files up in one line.
inline constexpr const char* kNotReadByDeepSpeed = "not read by DeepSpeed; copied as it is";

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

}  // namespace ckptdoc::repair
