// Catalog building: optimizer files named by Ulysses sequence-parallel rank. With ALST's parallel_state_sp as
// the engine's mpu, DeepSpeed 0.18 asks the mpu for the model-parallel rank when it names a file, and the mpu
// answers with the sequence-parallel rank: rank D of the sp x dp job writes zero_pp_rank_D_mp_rank_{D % sp}
// (0.18.4, measured; 0.17.6 cannot save with that mpu, 0.19 names every rank's file mp_rank_00). The job is
// one data-parallel job of sp x dp ranks: the model file says mp_world_size 1 and only mp rank 0 has one.
// Measured on 0.18.4's files: 0.18.4's own load_checkpoint fails on them, 0.19 loads them once renamed.
#include <algorithm>
#include <set>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "sources/deepspeed/catalog_builder.h"

namespace ckptdoc::deepspeed {

namespace {

std::string n(int64_t v) {
  return std::to_string(v);
}

}  // namespace

void CatalogBuilder::recognise_sequence_parallel_names() {
  if (cat_.mp_rank != 0 || cat_.mp_world_size != 1) return;
  std::set<int> dp_ranks;
  int highest = 0;
  for (const auto& f : cat_.files) {
    if (f.role == FileRole::Optim) {
      // Each rank of the job writes one file: a dp rank named twice is another layout (or a stray copy).
      if (f.dp_rank < 0 || f.mp_rank < 0 || !dp_ranks.insert(f.dp_rank).second) return;
      highest = std::max(highest, f.mp_rank);
    } else if (f.mp_rank > 0 && f.role != FileRole::Other) {
      return;  // a model, expert or layer file of another mp rank: a model-parallel job
    }
  }
  if (highest == 0) return;
  const int sp = highest + 1;
  // ALST's groups are consecutive ranks, so the sequence-parallel rank of rank D is D % sp; a lost tensor
  // rank or mixed files do not give every file that name.
  for (const auto& f : cat_.files)
    if (f.role == FileRole::Optim && f.mp_rank != f.dp_rank % sp) return;
  if (cat_.dp_world_size > 0 && cat_.dp_world_size % sp != 0) return;

  std::string renames;  // what each file must be called for DeepSpeed 0.19 to find it
  std::vector<int> ranks;
  for (auto& f : cat_.files) {
    if (f.role != FileRole::Optim) continue;
    if (f.mp_rank > 0) {
      renames +=
          (renames.empty() ? "" : ", ") + f.path + " -> " + optim_file_name(f.bf16_prefix, f.dp_rank, 0);
      ranks.push_back(f.dp_rank);
    }
    f.mp_rank = 0;
  }
  sort_files(cat_.files);
  std::string split;
  if (cat_.dp_world_size > 0)
    split = "; ZeRO partitioned over its dp_world_size " + n(cat_.dp_world_size) +
            " ranks (sequence-parallel x data-parallel: " + n(sp) + " x " + n(cat_.dp_world_size / sp) + ")";
  job_problems_
      .emplace_back(model::Code::SequenceParallel,
                    "a Ulysses sequence-parallel job of " + n(sp) +
                        " ranks per sequence group: its ranks hold whole replicas of the model, not tensor "
                        "slices" +
                        split)
      .details = {{"sequence_parallel_size", n(sp)}};
  const std::string version = cat_.ds_version.empty() ? "DeepSpeed 0.18" : "DeepSpeed " + cat_.ds_version;
  Problem names{model::Code::SequenceParallelFileNames,
                version +
                    " named these optimizer files by sequence-parallel rank, and no DeepSpeed resumes them "
                    "so: 0.18's load_checkpoint stops on sequence-parallel rank 1 (IndexError in "
                    "state_dict_factory.py: it takes that rank for a model-parallel rank of a job of 1), "
                    "and 0.19 looks for mp_rank_00 on every rank (FileNotFoundError). Renamed, DeepSpeed "
                    "0.19 loads them with the same sequence-parallel groups: " +
                    renames + ". ckptdoc reads them as they are",
                {},
                ranks};
  names.details = {{"renames", renames}, {"sequence_parallel_size", n(sp)}};
  job_problems_.push_back(std::move(names));
}

}  // namespace ckptdoc::deepspeed
