#pragma once
// The catalog as JSON (what `ckptdoc inspect --json` prints; the GUI and tests read the same text).
// Top-level keys: kind ("deepspeed"), save_dir, tag, tag_dir, zero_stage, lp_dtype, optimizer_wrapper,
// dp_world_size, mp_world_size, optim_file_count, partition_count, ds_version, files[{path, role, dp_rank,
// mp_rank, bytes, bf16_prefix}], groups[{index, numel, padded_numel, partition_numel, params[{name, shape,
// numel, offset}], partitions[{rank, saved_numel, padding, real_numel, recorded_padding, fragments[{param,
// param_index, param_offset, partition_offset, numel}]}]}], buffer_names, frozen_params[{name, shape}],
// shared_params{alias: owner}, module_keys, global_steps, skipped_steps, global_samples, optimizer_step,
// optimizer_state_keys, optimizer_name_hint, loss_scaler{...}, lr_scheduler, trainable_numel,
// problems[{code, severity, message, file, ranks, params}].
// Tensor/pipeline/expert-parallel coordinates (added; the keys above describe model-parallel rank 0):
// mp_rank, pp, tp; parallel{mp_world_size, pp, tp, ep, pipeline, layer_stage{layer: stage}, moe_layers[{id,
// prefix, num_experts, ep_size}], legacy_expert_files}; files[] also {pp, tp, ep, layer, expert} (null where
// they do not apply); groups[] also {file_group, mp_rank, pp, tp, ep, expert} and params[] {lp_file, lp_key}
// (where the 16-bit weight is); problems[] also {pp, tp} (null: the whole job). checkpoint_to_json adds
// slices[]: every model-parallel rank's catalog with the same keys (without files and problems, which the top
// level lists for the whole job); slices[0] repeats the top level's groups.
#include <string>

#include "ckptdoc/sources/deepspeed/catalog.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::deepspeed {

std::string catalog_to_json(const Catalog& catalog, int indent = 2);
std::string checkpoint_to_json(const Checkpoint& checkpoint, int indent = 2);

}  // namespace ckptdoc::deepspeed
