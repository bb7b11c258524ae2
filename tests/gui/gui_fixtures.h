#pragma once
// Checkpoints for the GUI tests: healthy fixtures (read-only) and a copy whose fp32 masters were replaced
// with random values — the state load_checkpoint(..., load_optimizer_states=False) leaves behind.
#include <string>

#include "test_support.h"

namespace ckptdoc::test {

std::string healthy_fixture(const std::string& name);  // .../deepspeed/<name>/checkpoint
// Copies zero2_fp16_ws2 into `dir` and overwrites every rank's single_partition_of_fp32_groups with random
// values; returns the copy's save folder.
std::string make_stale_masters_checkpoint(const TempDir& dir);
// Writes dir/model.safetensors with six small tensors named as long as Hugging Face's (BART's decoder
// cross-attention, "model.decoder.layers.10.encoder_attn.k_proj.weight"); returns its path.
std::string make_long_names_weights(const TempDir& dir);

}  // namespace ckptdoc::test
