#pragma once
// The weight-vs-master density of one trainable param, streamed from the memory map: the param's slices are
// read chunk by chunk, twice (the common range, then the counts), so memory stays bounded by the chunk
// whatever the param's size (a 1-GB param costs a few MB). The counts equal density_2d() of the assembled
// param. Here and not in analysis/ because it reads a deepspeed::Checkpoint's partitions; the plot's bins are
// analysis/density.h's.
#include <cstdint>

#include "ckptdoc/analysis/density.h"
#include "ckptdoc/sources/deepspeed/open_options.h"  // Checkpoint
#include "ckptdoc/task/progress.h"

namespace ckptdoc::deepspeed {

// x = the lp weight upcast to float32, y = the fp32 master. No pairs (pairs == 0, counts zero) when the param
// has no lp weight (ZeRO-3 placeholders) or a rank's fp32 partition is absent. Throws ckptdoc::Error for a
// group or param that does not exist; Cancelled when progress->cancel() was called.
analysis::Density2D param_density(const Checkpoint& ckpt, int group, int param, int bins,
                                  Progress* progress = nullptr, int64_t chunk_elements = int64_t{1} << 20);

}  // namespace ckptdoc::deepspeed
