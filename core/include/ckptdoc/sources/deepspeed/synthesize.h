#pragma once
// Synthetic DeepSpeed checkpoints written by ckptdoc's own writer: a transformer-like model (embedding,
// per layer attention qkv/out and MLP up/down weights and biases, layer norms; decay and no-decay param
// groups; one persistent buffer; with a vocab, a head tied to the embedding) saved as DeepSpeed `ds_version`
// (0.12.6 by default) saves ZeRO-1/2/3 or BF16_Optimizer runs, with plausible Adam state. Options break it in
// the ways ckptdoc diagnoses (the #762 stale-fp32 bug, ...). Tensor bytes are generated while the file is
// written, so 100M+ parameter checkpoints need little memory. The layout of `--vocab` models at 0.19.8 is
// checked against real DeepSpeed 0.19.8 of the same recipe (tests/realds/test_realds_synth_layout.cpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckptdoc/dtype.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::deepspeed {

enum class SynthBreak : uint8_t {
  None,
  StaleFp32,            // fp32 masters at a fresh random init while lp holds trained weights (#762)
  StaleFp32OneRank,     // the same on rank dp / 2 only (one stale rank among many)
  ZeroMomentsWithStep,  // exp_avg = exp_avg_sq = 0 but step = global_steps
  NanInExpAvgSq,        // NaNs in rank 0's exp_avg_sq
  TruncateRank,         // the last rank's optimizer file cut in half
  MissingRank,          // the last rank's optimizer file absent
  WrongDpWorldSize,     // model file says dp + 1
};
// "none", "stale_fp32", "stale_fp32_one_rank", "zero_moments_with_step", "nan_in_exp_avg_sq",
// "truncate_rank", "missing_rank", "wrong_dp_world_size" (dashes accepted); throws ckptdoc::Error for
// anything else.
SynthBreak parse_synth_break(const std::string& s);
std::string_view synth_break_name(SynthBreak b);

struct SynthOptions {
  int stage = 2;                // ZeRO stage 1, 2 or 3
  DType dtype = DType::F16;     // F16 or BF16
  bool bf16_optimizer = false;  // BF16_Optimizer layout (bf16, ZeRO-1 partitioning, no zero_stage key)
  int dp = 2;
  int layers = 2;
  int64_t hidden = 64;
  int64_t vocab = 0;          // 0: 8 * hidden, no head; > 0: a language model whose head is the embedding
  int64_t target_params = 0;  // > 0: pick `hidden` so the model has about this many parameters
  int64_t global_steps = 10;
  uint64_t seed = 1;
  SynthBreak breakage = SynthBreak::None;
  int64_t sub_group_size = 1000000000;  // ZeRO-3 sub-group size (elements)
  std::string ds_version = "0.12.6";    // also decides what the files record (0.19.5+, 0.19.8+ keys)
  bool force = false;                   // replace an existing checkpoint in `dir`
};

struct SynthResult {
  std::string save_dir;  // absolute
  std::string tag;
  int64_t params = 0;              // trainable parameters
  uint64_t bytes = 0;              // bytes written
  std::vector<std::string> files;  // relative to save_dir, `latest` last
};

// Writes `<dir>/latest` and `<dir>/global_step<N>/...`. `dir` must not exist or be empty, unless
// `force` (then only its `latest` and tag folder are replaced). Throws ckptdoc::Error.
SynthResult write_synthetic_checkpoint(const std::string& dir, const SynthOptions& options,
                                       Progress* progress = nullptr, FileIo& io = current_io());

}  // namespace ckptdoc::deepspeed
