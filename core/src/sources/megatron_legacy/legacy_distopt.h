#pragma once
// distrib_optim.pt: the DistributedOptimizer's state beside model_optim_rng.pt in a legacy save
// (--use-distributed-optimizer; DistributedOptimizer.save_parameter_state -> get_parameter_state_dp_zero,
// megatron/core/optimizer/distrib_optimizer.py:1206-1362 in 0.18.0): {"buckets_coalesced": True,
// <gbuf_idx>: {(param_dtype, grad_dtype): {"param", "exp_avg", "exp_avg_sq": 1-D float32 of
// "numel_unpadded"}}}, each grad buffer's buckets gathered over data-parallel ranks and concatenated without
// their end padding. In a buffer, the params sit in reverse named_parameters order, each start rounded up to
// 64 elements (docs/megatron-bucket-layout.md, steps 2-3); bucket boundaries cut only the padding, which is
// not saved, so the coalesced tensor is that one-bucket layout exactly when its length matches (a bucket end
// that is not 64-aligned would make it shorter). ckptdoc places the mains only then, for one buffer of one
// dtype pair holding every model tensor: anything else is said, not guessed. docs/megatron-legacy-format.md.
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/torch_file.h"
#include "legacy_rank.h"

namespace ckptdoc::megatron_legacy {

struct DistOptSlot {
  size_t model = 0;   // RankContent::model index
  int64_t start = 0;  // element offset in the coalesced tensors
};

struct DistOptState {
  std::string path, shown;                // "<mp_rank>/distrib_optim.pt"
  std::shared_ptr<const TorchFile> file;  // null when unreadable
  std::string error;
  ErrorKind error_kind = ErrorKind::Other;
  std::vector<PickleHazard> hazards;
  std::vector<std::pair<std::string, Tensor>> tensors;  // "<gbuf>.<dtypes>.<key>", every tensor read
  Tensor param;        // buffer 0's fp32 mains, when the layout is one ckptdoc knows
  std::string dtypes;  // "(bfloat16, float32)"
  int64_t numel_unpadded = -1;
  std::vector<DistOptSlot> slots;  // placed mains; empty with `why` when not placed
  std::string why;
  bool readable() const { return file != nullptr; }
};

// Reads `path` inertly and places the model's mains in it (never throws for the file's content).
DistOptState read_distopt(const std::string& path, const std::string& shown, const RankContent& rank);

}  // namespace ckptdoc::megatron_legacy
