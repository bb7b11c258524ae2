#pragma once
// `repair --reset-optimizer` of a Megatron-core save whose DistributedOptimizer state is in bucket space
// (param_state_sharding_type dp_reshardable, Megatron-LM's default): 1-D tensors
// optimizer.distributed.dp_group_idx_<i>.gbuf_idx_<g>.dtype_(...).bucket_idx_<b>.{param,exp_avg,exp_avg_sq}
// beside each dp group's ShardedObject optimizer.distributed.dp_group_idx_<i>.optimizer/shard_* (a torch.save
// of the inner optimizer's state dict without its tensors: the param groups, each with a float `step`) and
// per_bucket_numel[_unpadded]. A copy of the iteration folder whose exp_avg / exp_avg_sq buckets are zero
// (their storage records rewritten) and whose param groups' steps are 0.0 (their BINFLOAT bytes in each
// ShardedObject's data.pkl, pickle_steps.h); the fp32 `param` buckets, the weights, per_bucket_numel,
// common.pt and .metadata are the input's bytes. The input is never written.
#include <string>

#include "ckptdoc/sources/dcp/checkpoint.h"
#include "megatron_folder.h"
#include "reset_optimizer.h"

namespace ckptdoc::megatron {

// `in` is the checkpoint of `folder`, `out` the output already checked (dcp::checked_new_output). Throws
// ckptdoc::Error Unsupported for an optimizer.distributed.* key it does not know (another optimizer's state)
// or a ShardedObject whose steps are not one float per param group, and Inconsistent when the copy does not
// read back as the input's with zero moments and step 0 (nothing is published then).
// `progress` counts the copy's bytes, then the moments zeroed, and is checked for a cancel between steps.
ResetResult reset_bucket_optimizer(const IterationFolder& folder, const dcp::Checkpoint& in,
                                   const std::string& out, Progress* progress = nullptr);

}  // namespace ckptdoc::megatron
