#pragma once
// A legacy Megatron save's storage map for the views (sources/storage_map.h): each rank's model_optim_rng.pt
// and distrib_optim.pt with the storage records of the tensors it holds, and the keys as the model's global
// tensors, each rank's piece a chunk box: tensor-parallel pieces side by side along megatron-core's split
// axis (legacy_weights.h), a replicated param one full box per rank, pipeline stages' layers under their
// global numbers (legacy_pipeline.h). The fp32 mains and Adam moments are keys too (megatron-core's
// torch_dist names: optimizer.state.fp32_param.<name>, .exp_avg., .exp_avg_sq.) where the rank's param groups
// (legacy_mains.h) or distrib_optim.pt's layout (legacy_distopt.h) place them. A tensor that cannot be placed
// on every rank of its stage keeps a key of its own rank ("mp_rank_00/model.<name>",
// "mp_rank_00/optimizer.optimizer.state.0.step"): listed, never dropped, never placed on a guess. Read from
// the inert reads; nothing is executed.
#include <vector>

#include "ckptdoc/sources/storage_map.h"
#include "legacy_distopt.h"
#include "legacy_folder.h"
#include "legacy_rank.h"

namespace ckptdoc::megatron_legacy {

// `distopts[r]`: rank r's distrib_optim.pt when read (null when none).
sources::StorageMap legacy_storage_map(const LegacyFolder& folder, const std::vector<RankContent>& ranks,
                                       const std::vector<const DistOptState*>& distopts);

}  // namespace ckptdoc::megatron_legacy
