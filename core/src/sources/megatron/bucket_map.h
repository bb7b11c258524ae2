#pragma once
// Which slice of a DistributedOptimizer bucket is which model param, in a save in bucket space
// (param_state_sharding_type "dp_reshardable", Megatron-LM's default):
//   optimizer.distributed.dp_group_idx_<i>.gbuf_idx_<g>.dtype_(<param>, <grad>).bucket_idx_<b>.param
// each a 1-D fp32 tensor of the whole bucket across DP, bucket-relative. The map is rebuilt from `.metadata`
// alone (docs/megatron-bucket-layout.md): the model keys in their stored order, layer-stacked keys expanded
// layer by layer, walked in reverse with each param's start rounded up to 64 elements, a bucket closed where
// its tensor's size says. Checked by the walk's closure and by the bucket tensors' chunk cuts (one chunk per
// param or gap, cut again at the DP shards). Whatever the map cannot place is refused with why.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/dtype.h"
#include "ckptdoc/sources/dcp/checkpoint.h"

namespace ckptdoc::megatron {

// [chained_<c>.]optimizer.distributed.dp_group_idx_<i>.gbuf_idx_<g>.dtype_(<P>, <G>).bucket_idx_<b>.<state>
struct BucketKey {
  int chained = -1;  // a ChainedOptimizer's optimizer c (its chained_<c>. prefix), else -1
  int group = 0, gbuf = 0, bucket = 0;
  std::string dtypes;       // "torch.bfloat16, torch.float32" (the pair inside dtype_(...))
  std::string param_dtype;  // "torch.bfloat16"
  std::string state;        // "param", "master_param", "exp_avg", "exp_avg_sq"
};
// The parts of a bucket-space key, chained_<c>. prefixed or not; nullopt for any other key.
std::optional<BucketKey> parse_bucket_key(const std::string& key);
// How a dp group is named: "dp_group_idx_<i>", or "chained_<c>.dp_group_idx_<i>" for optimizer c of a
// ChainedOptimizer (the dense and the expert optimizers number their groups each from 0).
std::string group_label(int chained, int group);

// The length of a ChainedOptimizer's "chained_<i>." at the start of `key` (megatron-core prefixes every key
// of each of its optimizers so under dp_reshardable: optimizer.py, ChainedOptimizer.sharded_state_dict), else
// 0.
size_t chained_prefix_length(const std::string& key);
// Whether `key` is of the bucket-space state: optimizer.distributed.*, after a chained_<i>. prefix if any.
bool is_bucket_space_key(const std::string& key);
// Whether `key` is one of its bucket tensors (...bucket_idx_<b>.<state>), chained_<i>. keys included.
bool is_bucket_state_key(const std::string& key);
// A ChainedOptimizer's bucket-space key: chained_<i>.optimizer.distributed.* (megatron-core 0.16's
// add_prefix_for_sharding: a mixture-of-experts model's dense and expert optimizers, mapped) or
// optimizer.distributed.chained_<i>.* (not mapped: map_buckets refuses it, saying so).
bool is_chained_bucket_key(const std::string& key);

// One model param's place: its box of the weight key and its slice [start, start + numel) of a bucket.
struct BucketSlot {
  // "decoder.layers.<l>.<rest>" for layer-stacked keys, else the key; an expert's param
  // "decoder.layers.<l>.mlp.experts.experts.<x>.<rest>" (x the global expert, megatron-core's own name for it
  // under singleton_local_shards)
  std::string name;
  const dcp::Entry* weight = nullptr;
  const dcp::Chunk* chunk = nullptr;  // the chunk of `weight` that is this param (one tensor rank, one layer)
  std::vector<int64_t> offsets, sizes;  // its box of `weight` (the layer axis of size 1 kept)
  int bucket = 0;
  int64_t start = 0, numel = 0;
};

// One dp_group_idx (one model-parallel rank: tensor rank i % tp of pipeline stage i / tp), one gbuf (under a
// virtual pipeline, model chunk `gbuf` of that stage). Of a mixture-of-experts model's expert optimizer: one
// rank of the expert tensor x expert x pipeline group (expert tensor rank i % etp, expert rank i / etp % ep,
// stage i / (etp * ep)), its buffer holding that expert rank's experts alone.
struct BucketGroup {
  int chained = -1;  // the ChainedOptimizer's optimizer (chained_<c>.), else -1
  bool expert = false;
  int ep_rank = 0;  // the expert rank (expert groups)
  int index = 0;
  int gbuf = 0;  // the model chunk's grad buffer under a virtual pipeline (one BucketGroup per gbuf), else 0
  int tp_rank = 0, pp_rank = 0;
  DType lp = DType::BF16;
  std::vector<const dcp::Entry*> buckets;  // the `param` (or `master_param`) tensor of each bucket_idx
  std::vector<BucketSlot> slots;           // in buffer order (the model order reversed)
  // The [begin, end) ranges of bucket b that no param covers (64-alignment gaps: torch.empty memory).
  std::vector<std::pair<int64_t, int64_t>> gaps(int b) const;
  std::string label() const { return group_label(chained, index); }
};

struct BucketMap {
  bool bucket_space = false;  // any optimizer.distributed.* key
  int tp = 1, pp = 1;
  int etp = 1, ep = 1, experts = 0;  // a mixture-of-experts model's expert tensor and expert sizes, experts
  int vpp = 1;  // model chunks per stage (a virtual pipeline: every group has vpp gbufs of one dtype pair)
  std::vector<BucketGroup> groups;   // the groups mapped and checked
  std::vector<std::string> refused;  // "dp_group_idx_<i>: why" or "why" for the whole save
  std::string state = "param";       // "master_param" under the precision-aware optimizer
};

// The map of `md`'s bucket-space state; `key_order` is `.metadata`'s stored key order (stored_key_order).
BucketMap map_buckets(const dcp::Metadata& md, const std::vector<std::string>& key_order);

// The keys of `.metadata`'s state_dict_metadata in their stored order (dcp::Metadata keeps them sorted; each
// Entry's stored_index is its place, kept from the one read of the file). Throws ckptdoc::Error naming the
// file for merged per-rank metadata, which has no single order.
std::vector<std::string> stored_key_order(const dcp::Metadata& md);

}  // namespace ckptdoc::megatron
