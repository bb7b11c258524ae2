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
#include <string>

#include "ckptdoc/deepspeed/catalog.h"

namespace ckptdoc::deepspeed {

std::string catalog_to_json(const Catalog& catalog, int indent = 2);

}  // namespace ckptdoc::deepspeed
