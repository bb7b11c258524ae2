#pragma once
// The weights of a legacy Megatron pipeline-parallel save joined into one model. Each stage's rank file
// numbers its transformer layers from 0 (decoder.layers.<i>.*: the stage's own TransformerBlock);
// megatron-core gives layer i of a stage the global number offset + i, where the offset is the count of
// layers on the stages before it (get_transformer_layer_offset, transformer/transformer_layer.py; uneven
// splits included, since the layers of a pipeline without virtual stages are contiguous and in stage order).
// So each stage's layers are renumbered by the layers the files of the earlier stages hold, which must add up
// to the saved args.num_layers. The other params (embedding.*, decoder.final_layernorm.*, output_layer.*)
// live on one stage each; a name on two stages is refused rather than picked.
#include <string>
#include <vector>

#include "ckptdoc/format/safetensors.h"  // NamedTensor

namespace ckptdoc::megatron_legacy {

struct Stage {
  std::string shown;                 // its (first) rank file, for messages
  std::vector<NamedTensor> tensors;  // its weights, tensor-parallel ranks merged, its own layer numbers
};

struct JoinedStages {
  std::vector<NamedTensor> tensors;  // stage order, each stage's saved order, global layer numbers
  std::vector<int> offsets;          // each stage's first global layer number
  size_t renamed = 0;                // tensors whose layer number changed
};

// Throws ckptdoc::Error Unsupported naming the stage's file when its layer numbers are not 0..n-1, a name
// repeats across stages, or the layers do not add up to `num_layers` (when saved: > 0).
JoinedStages join_stages(const std::string& dir, std::vector<Stage> stages, int num_layers);

}  // namespace ckptdoc::megatron_legacy
