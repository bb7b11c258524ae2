#pragma once
// Damage for tests, written with ckptdoc's own torch writer (no DeepSpeed needed): one rank's fp32 masters
// replaced by fresh random values, the state load_checkpoint(..., load_optimizer_states=False) leaves behind.
#include <cstdint>
#include <string>

namespace ckptdoc::test {

// Rewrites every single_partition_of_fp32_groups tensor of a ZeRO-1/2 optimizer file with N(0, 0.02) noise.
void replace_fp32_masters_with_noise(const std::string& optim_file, uint32_t seed);
// `<tag_dir>/zero_pp_rank_<rank>_mp_rank_00_optim_states.pt`
std::string optim_file_of(const std::string& tag_dir, int rank);

}  // namespace ckptdoc::test
