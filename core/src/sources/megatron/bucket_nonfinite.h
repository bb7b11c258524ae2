#pragma once
// The DCP diagnosis's dcp-non-finite findings on a bucket-space save (dp_reshardable), judged with the
// param -> slice map (bucket_map.h). A bucket tensor holds the params' slices and the 64-alignment gaps
// between them, torch.empty memory that megatron-core saves as it is (NaN/Inf there are normal):
//  - mapped: NaN/Inf only in the gaps are not damage; the others are named by the params holding them;
//  - not mapped (the map refused the save or the tensor's dp group): gap cannot be told from param, so the
//    tensor's NaN/Inf are not judged either way, and the report says so with the map's refusal.
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "main_params.h"

namespace ckptdoc::megatron {

struct BucketNonfinite {
  int64_t in_gaps = 0;                     // NaN/Inf of mapped bucket tensors that lie only in the gaps
  int64_t unjudged = 0;                    // NaN/Inf of bucket tensors the map does not place
  std::vector<std::string> unjudged_keys;  // those tensors
  std::vector<std::string> not_checked;    // the lines for the report's "not checked"
};

// Removes from `r.problems` the dcp-non-finite findings the map clears or cannot judge (above) and names
// the params of the others. Does nothing on a save that is not in bucket space.
BucketNonfinite judge_bucket_nonfinite(dcp::Report& r, const dcp::Checkpoint& ckpt,
                                       const MainParamComparison& mains);

}  // namespace ckptdoc::megatron
