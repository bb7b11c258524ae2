#pragma once
// megatron-core's padding of a DistributedOptimizer bucket, and the data-parallel size a bucket-space save's
// shards show (check 6 of docs/megatron-bucket-layout.md).
#include <cstdint>
#include <optional>

#include "ckptdoc/sources/dcp/metadata.h"

namespace ckptdoc::megatron {

// Whether `padded` is `unpadded` padded as megatron-core 0.16.1 pads a bucket at data-parallel size `dp`
// (param_and_grad_buffer.py, _ParamAndGradBuffer.__init__, _pad_end_of_bucket_if_needed): the bucket's end
// rounded up to a multiple of lcm(dp, 128), or of lcm(dp, 128, 2^16) under pad_buckets_for_high_nccl_busbw
// (not recorded in the save, so either is taken). A bucket starts where the one before ended, so its padded
// size is its unpadded size rounded up the same way.
bool padded_by_megatron(int64_t padded, int64_t unpadded, int64_t dp);

// lcm(dp, 128): what a bucket's padded size is a multiple of (without the NCCL bus bandwidth option).
int64_t bucket_divisor(int64_t dp);

// The data-parallel size that wrote bucket tensor `e` whose padded size is `padded`: each DP rank writes its
// contiguous shard [r * padded / dp, (r + 1) * padded / dp) of the bucket (cut at the unpadded end), so the
// storage rank (__<rank>_<n>.distcp) of the first element ends its chunks at padded / dp. nullopt when one
// rank wrote the whole tensor (its shard holds all of it) or the chunks say no such thing.
std::optional<int64_t> dp_from_shards(const dcp::Entry& e, int64_t padded);

}  // namespace ckptdoc::megatron
