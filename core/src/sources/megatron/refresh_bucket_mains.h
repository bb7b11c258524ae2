#pragma once
// `repair --refresh-fp32` of a Megatron-core save whose DistributedOptimizer state is in bucket space
// (param_state_sharding_type dp_reshardable, Megatron-LM's default): each param's slice [start, start +
// numel) of its bucket's fp32 `param` (or `master_param`) tensor, found by bucket_map.h from `.metadata`
// alone, := the upcast of its bf16/fp16 weight box. The bucket tensors are cut into chunks at every param
// boundary (the map's check), so a slice is whole chunks: each one's storage record is rewritten in a copy
// (same size, new CRC-32) and `.metadata`, common.pt and every offset stay the input's bytes. The
// 64-alignment gaps between params (torch.empty memory, no param's) are left as stored, as are the Adam
// moments and the step. The input is never written.
#include <string>

#include "ckptdoc/sources/dcp/checkpoint.h"
#include "megatron_folder.h"
#include "refresh_mains.h"

namespace ckptdoc::megatron {

// `in` is the checkpoint of `folder`, `out` the output already checked (dcp::checked_new_output). Refuses,
// writing nothing, whatever diagnose could not compare (ckptdoc::Error Unsupported, naming the iteration
// folder and why): a bucket map refused (virtual pipelines, experts, a walk that does not close ...), a group
// whose mains say the map's order is ambiguous, an unreadable chunk; and a bucket chunk that is not a plain
// contiguous float32 record. Verifies the copy before publishing it (Inconsistent otherwise): every slice is
// then the exact upcast of its weight and every gap chunk the input's bytes. `progress` counts the copy's
// bytes, then the params refreshed, and is checked for a cancel between steps.
RefreshResult refresh_bucket_mains(const IterationFolder& folder, const dcp::Checkpoint& in,
                                   const std::string& out, Progress* progress = nullptr);

}  // namespace ckptdoc::megatron
