#pragma once
// The checks of a bucket-space save (dp_reshardable) beside the fp32 mains' comparison, from the same map
// (bucket_map.h; docs/megatron-bucket-layout.md, "Checks"):
//   check 5: every placed param's slice of its bucket's exp_avg_sq is >= 0 (Adam's running mean of squared
//            gradients); the 64-alignment gaps hold torch.empty memory and are never judged;
//   check 6: each dp group's pickled per_bucket_numel_unpadded equals its bucket tensors' sizes (param,
//            exp_avg, exp_avg_sq alike) and per_bucket_numel is that size padded as megatron-core pads it
//            at the save's data-parallel size (bucket_padding.h);
// and where the NaN/Inf of a bucket tensor or of a model weight lie, by param.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bucket_map.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/sources/dcp/diagnose.h"

namespace ckptdoc::megatron {

// The NaN/Inf of one tensor by the params that hold them.
struct NonfinitePlaces {
  bool bucket = false;                                   // a bucket tensor (else a model weight)
  std::vector<std::pair<std::string, uint64_t>> params;  // param name, its NaN/Inf, in map order
  uint64_t in_params = 0;                                // their sum
  int64_t gap_elements = 0;                              // a bucket tensor's elements no param owns
};
// `e` as a bucket tensor of a mapped group (by its slices, the gap chunks never read) or as a model weight
// the map places (by its params' chunks: a layer, a tensor rank); nullopt for any other tensor.
std::optional<NonfinitePlaces> nonfinite_places(const dcp::Checkpoint& ckpt, const BucketMap& map,
                                                const dcp::Entry& e);

// A check's findings and what it covered.
struct BucketCheck {
  std::vector<dcp::Problem> problems;
  size_t judged = 0;  // check 5: params whose slice was read (or known clean); check 6: buckets
  size_t groups = 0;  // check 6: dp groups whose objects were read
  std::vector<std::string> not_checked;
};

// Check 5 (dcp-moments-negative naming the param, its slice, the bucket key and file). `read` is the DCP
// diagnosis's per-tensor summary: an exp_avg_sq read whole with no negative value is not read again.
BucketCheck check_second_moments(const dcp::Checkpoint& ckpt, const BucketMap& map,
                                 const std::vector<dcp::TensorSummary>& read);

// Check 6 (layout-mismatch naming the group's per_bucket_numel_unpadded object), for every dp group of the
// save whether or not its map was made.
BucketCheck check_bucket_sizes(const dcp::Checkpoint& ckpt);

}  // namespace ckptdoc::megatron
