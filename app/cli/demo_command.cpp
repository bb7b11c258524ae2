// `ckptdoc demo` and `ckptdoc synth`: write synthetic DeepSpeed checkpoints with ckptdoc's own writer.
#include <cstdio>
#include <filesystem>
#include <string>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/synthesize.h"
#include "commands.h"
#include "format_helpers.h"

namespace ckptdoc::cli {
namespace {

std::string shell_quote(const std::string& path) {
  if (path.find_first_of(" \t'\"$\\") == std::string::npos) return path;
  std::string q = "'";
  for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int run_demo(const DemoOptions& o) {
  deepspeed::SynthOptions s;
  s.stage = 2;
  s.dtype = DType::F16;
  s.dp = 2;
  s.layers = o.params > 0 ? 4 : 3;
  s.hidden = 64;
  s.target_params = o.params;
  s.global_steps = 100;
  s.breakage = o.healthy ? deepspeed::SynthBreak::None : deepspeed::SynthBreak::StaleFp32;
  s.force = o.force;
  deepspeed::SynthResult r;
  try {
    r = deepspeed::write_synthetic_checkpoint(o.dir, s);
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc demo: %s\n", e.what());
    return 2;
  }
  std::printf(
      "Wrote a DeepSpeed ZeRO-2 fp16 checkpoint (data-parallel 2, %d transformer layers, %s parameters, %s)\n"
      "to %s\n",
      s.layers, grouped(r.params).c_str(), human_bytes(r.bytes).c_str(), r.save_dir.c_str());
  for (const auto& f : r.files) std::printf("  %s\n", f.c_str());
  if (o.healthy) {
    std::printf("\nThe checkpoint is healthy: fp32 masters match the fp16 weights.\n");
  } else {
    std::printf(
        "\nIts fp32 master weights are stale: they hold a fresh random init while the fp16 weights are\n"
        "trained -- what DeepSpeed 0.10.2-0.12.6 leaves after load_checkpoint(..., "
        "load_optimizer_states=False)\n"
        "followed by save_checkpoint (DeepSpeed PR #762). The next optimizer step would overwrite the "
        "trained\n"
        "weights with the random masters.\n");
  }
  const std::string dir = shell_quote(r.save_dir);
  const std::string fixed = shell_quote(r.save_dir + "-fixed");
  std::printf("\nNext:\n  ckptdoc diagnose %s\n", dir.c_str());
  if (!o.healthy)
    std::printf("  ckptdoc repair %s -o %s --refresh-fp32\n", dir.c_str(), fixed.c_str());
  else
    std::printf("  ckptdoc repair %s -o %s --repartition --world-size 4\n", dir.c_str(), fixed.c_str());
  return 0;
}

int run_synth(const SynthCliOptions& o) {
  deepspeed::SynthOptions s;
  try {
    s.stage = o.stage;
    if (o.dtype == "fp16" || o.dtype == "float16")
      s.dtype = DType::F16;
    else if (o.dtype == "bf16" || o.dtype == "bfloat16")
      s.dtype = DType::BF16;
    else
      throw Error("", "--dtype", "expected fp16 or bf16, found '" + o.dtype + "'");
    s.dp = o.dp;
    s.layers = o.layers;
    s.hidden = o.hidden;
    s.vocab = o.vocab;
    s.target_params = o.params;
    s.global_steps = o.steps;
    s.breakage = deepspeed::parse_synth_break(o.breakage);
    s.bf16_optimizer = o.bf16_optimizer;
    s.sub_group_size = o.sub_group_size;
    s.ds_version = o.ds_version;
    s.seed = o.seed;
    s.force = o.force;
    const auto r = deepspeed::write_synthetic_checkpoint(o.dir, s);
    std::printf("%s: %s params, %s in %zu files\n", r.save_dir.c_str(), grouped(r.params).c_str(),
                human_bytes(r.bytes).c_str(), r.files.size());
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc synth: %s\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace ckptdoc::cli
