#pragma once
// How a job was parallelised: pipeline stages, tensor-parallel ranks and MoE expert layers
// (deepspeed-format.md §8). Source-neutral; mp rank = pipeline stage * tp + tensor rank.
#include <map>
#include <string>
#include <vector>

namespace ckptdoc::model {

// One MoE layer (DeepSpeed: deepspeed.moe.layer.MoE) as its expert files and the model file's num_experts
// say.
struct MoeLayer {
  int id = 0;           // the layer id in expert file names (index among the model's MoE modules)
  std::string prefix;   // module path of its experts, e.g. "moe.deepspeed_moe.experts.deepspeed_experts."
  int num_experts = 0;  // from the model file's num_experts
  int ep_size = 1;      // expert-parallel size of its expert group
};

struct Topology {
  int mp_world_size = 1;
  int pp = 1, tp = 1;     // pipeline stages, tensor-parallel ranks
  bool pipeline = false;  // pipeline-parallel model: weights live in per-layer files (DeepSpeed: layer_XX)
  // DeepSpeed file naming: layer_XX-model_YY-model_states.pt (else layer_XX-model_states.pt).
  bool layer_files_named_by_tp = false;
  std::vector<MoeLayer> moe_layers;
  int ep = 1;  // largest expert-parallel size (1 without MoE)
  // DeepSpeed file naming: expert_E_mp_rank_XX_model_states.pt (before 2021-10).
  bool legacy_expert_files = false;
  std::map<int, int>
      layer_stage;  // pipeline layer index -> stage that owns it (from each stage's param names)
  int stage_of(int mp_rank) const { return tp > 0 ? mp_rank / tp : 0; }
  int tp_of(int mp_rank) const { return tp > 0 ? mp_rank % tp : 0; }
  bool model_parallel() const { return mp_world_size > 1; }
  bool moe() const { return !moe_layers.empty(); }
};

// "pp S, tp T" (only the parts that are parallel: "tp 1" without pipeline, "pp 2" without tensor
// parallelism).
std::string slice_label(const Topology& t, int pp, int tp);

}  // namespace ckptdoc::model
