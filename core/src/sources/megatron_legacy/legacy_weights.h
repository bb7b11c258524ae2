#pragma once
// The model weights of a legacy Megatron save as export writes them: one rank's tensors at tensor-parallel
// size 1; at size > 1 each param merged along the axis megatron-core splits it on (its sharded_state_dict:
// ColumnParallelLinear and VocabParallelEmbedding on axis 0, RowParallelLinear's weight on axis 1), and
// a param megatron-core replicates taken once after checking that every rank holds the same bytes.
// Pipeline stages are joined, their layers renumbered into the global numbering (legacy_pipeline.h).
// Anything else is refused by name (Unsupported) before a byte is written: expert parallel saves, a virtual
// pipeline, a gated MLP (--swiglu: its linear_fc1 is two halves per rank), a name that is split in a way
// these rules do not know.
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/format/safetensors.h"  // NamedTensor
#include "legacy_folder.h"
#include "legacy_rank.h"

namespace ckptdoc::megatron_legacy {

struct LegacyWeights {
  std::vector<NamedTensor> tensors;   // saved (named_parameters) order, lazily produced
  size_t merged = 0, replicated = 0;  // tensor-parallel size > 1: how each was made
  size_t stages = 1;                  // pipeline stages joined (legacy_pipeline.h)
  size_t renumbered = 0;              // tensors whose layer number the join changed
};

// The axis megatron-core splits a GPT param on over tensor-parallel ranks (0.18.0: tensor_parallel/layers.py
// VocabParallelEmbedding and ColumnParallelLinear shard axis 0, RowParallelLinear's weight axis 1, through
// make_sharded_tensors_for_checkpoint / make_tp_sharded_tensor_for_checkpoint); -1: replicated (layer norms,
// position embeddings, RowParallelLinear's bias).
int tp_axis(const std::string& name);

// Throws ckptdoc::Error naming the rank file or param that cannot be exported.
LegacyWeights select_weights(const LegacyFolder& folder, const std::vector<RankContent>& ranks);

}  // namespace ckptdoc::megatron_legacy
