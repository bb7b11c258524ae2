#pragma once
// The parallel layout of a job (deepspeed-format.md §8) from its file names and each model-parallel rank's
// model file: pipeline stages and tensor ranks (mp = stage * tp + tensor rank), which stage owns which
// pipeline layer, the MoE layers and their experts; and every file's coordinates in it.
#include <functional>
#include <vector>

#include "ckptdoc/format/value.h"
#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed::detail {

// The parsed root of mp rank m's model file, nullptr when it is missing or unreadable.
using ModelRootFn = std::function<const Value*(int mp_rank)>;
// The parsed root of another file (expert files), nullptr when unreadable.
using FileRootFn = std::function<const Value*(const CheckpointFile&)>;

// Problems met (a tensor-parallel size that the file names and the stages' params disagree on) are appended.
Topology derive_topology(const std::vector<CheckpointFile>& files, const ModelRootFn& model_root,
                         const FileRootFn& file_root, std::vector<Problem>& problems);

// Fills pp/tp/ep of every file, and the mp rank of pipeline layer files whose stage is known.
void assign_file_coordinates(std::vector<CheckpointFile>& files, const Topology& t);

// The pipeline layer index a module name starts with ("12.mlp.weight" -> 12), -1 for other names.
int pipeline_layer_of(const std::string& name);

// MoE: the global expert id and the layer of an expert param's name ("<prefix><id>.rest"), or {-1, -1}.
std::pair<int, int> expert_of(const Topology& t, const std::string& name);
// The name with its local expert id replaced by the global one of expert-parallel rank `ep_rank`.
std::string global_expert_name(const Topology& t, const std::string& local_name, int ep_rank);
// The inverse: the local name expert-parallel rank `ep_rank`'s files use for a global expert name.
std::string local_expert_name(const Topology& t, const std::string& global_name, int ep_rank);

inline constexpr const char* kExpertMarker = ".deepspeed_moe.experts.deepspeed_experts.";

}  // namespace ckptdoc::deepspeed::detail
