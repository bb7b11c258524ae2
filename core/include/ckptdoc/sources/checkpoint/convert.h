#pragma once
// Converting between rigid ZeRO checkpoints and DeepSpeed universal checkpoints (deepspeed-format.md §7).
//
// convert_to_universal writes, one param at a time from the memory-mapped rank files, the folder DeepSpeed's
// ds_to_universal.py writes for the target DeepSpeed version, inside a new save folder whose
// `latest_universal` names it, so `engine.load_checkpoint(OUT)` with "checkpoint": {"load_universal": true}
// loads it as it is. convert_to_zero writes ordinary rigid ZeRO-1/2 (or BF16_Optimizer) files for a chosen
// data-parallel size from a universal folder. Both write into a temporary folder beside the output, rename it
// into place, and verify the result by re-opening it; the input is never modified.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/sources/deepspeed/open_options.h"  // Checkpoint
#include "ckptdoc/task/progress.h"

namespace ckptdoc::universal {

// What a DeepSpeed version's universal loader reads (§7.3).
enum class LoaderKind : uint8_t {
  Iteration,  // 0.12.3-0.14.0: fp32/exp_avg/exp_avg_sq.pt; Adam step := client_state['iteration'] + 1
  StepFiles,  // 0.14.1+: also step.pt per param and optimizer_state.pt['param_groups'] (DeepSpeed PR #5289)
};

struct TargetVersion {
  std::string version;  // "0.12.6"
  LoaderKind loader = LoaderKind::StepFiles;
  // 0.19's ds_to_universal.py also writes zero/<name>/fp32.pt ({'param': value as float32}) for every entry
  // of the module state dict that has no optimizer state (buffers, frozen params); its loaders ignore them.
  bool module_entries = false;
  std::vector<std::string> caveats;  // known gaps of that version's loader, in words
};
// The loader of `ds_version` (e.g. "0.12.6+c00388a2e"). Throws ckptdoc::Error for text that is no version and
// for versions whose universal loader cannot restore the optimizer step (before 0.12.3).
TargetVersion target_version(const std::string& ds_version);

struct ConvertResult {
  std::string output;                    // the save folder written
  std::string tag;                       // the tag folder inside it
  std::string target;                    // "universal" or "zero"
  std::vector<std::string> assumptions;  // what had to be assumed, in words (printed by the CLI)
  std::vector<std::string> notes;        // what the user should know to load it
  size_t params = 0;
  size_t files = 0;
  uint64_t bytes_written = 0;
  double write_seconds = 0, verify_seconds = 0;
  // What re-opening the output found: to universal, the catalog's findings (its values equal the source's bit
  // for bit, checked); to zero, a full diagnosis.
  analysis::Report verification;
  std::vector<std::string> verify_failures;  // checks of the written output that failed (empty = verified)
  bool verified() const { return verify_failures.empty() && !verification.has_error(); }
};

struct ToUniversalOptions {
  std::string for_deepspeed;             // target DeepSpeed version; empty: the checkpoint's own ds_version
  std::string tag;                       // tag folder name inside the output; empty: "<input tag>_universal"
  bool force = false;                    // replace a non-empty output folder
  DeviceKind device = DeviceKind::Auto;  // for the verification's diagnosis
  unsigned threads = 0;                  // files written at once (0: 4: the work is mostly waiting on writes)
};

// From a ZeRO-1/2 (fp16/bf16) or BF16_Optimizer checkpoint. Where the model file carries
// universal_checkpoint_info the files equal ds_to_universal.py's (of the target version); otherwise a plain
// data-parallel model is assumed (every param whole, cat_dim 0) and said so in `assumptions`. Throws
// ckptdoc::Error, with nothing written, for inputs it cannot convert (ZeRO-3, tensor/pipeline parallel,
// elastic or empty optimizer state, damaged ranks).
ConvertResult convert_to_universal(const deepspeed::Checkpoint& ckpt, const std::string& output,
                                   const ToUniversalOptions& options = {}, Progress* progress = nullptr,
                                   FileIo& io = current_io());

struct ToZeroOptions {
  std::optional<int> world_size;      // data-parallel size of the output (default: the template's)
  std::optional<std::string> target;  // a rigid checkpoint whose optimizer files give the hyper-parameters
  std::string tag;                    // tag folder name; empty: the universal tag without "_universal"
  bool force = false;
  DeviceKind device = DeviceKind::Auto;
};

// From a universal checkpoint (ZeRO-1/2 or BF16_Optimizer). The Adam hyper-parameters come from
// zero/optimizer_state.pt['param_groups'] (DeepSpeed 0.14.1+ converters write them) or from `target`;
// without either the conversion is refused. Tensors equal what `repair --repartition` writes from the
// original checkpoint.
ConvertResult convert_to_zero(const deepspeed::Checkpoint& universal, const std::string& output,
                              const ToZeroOptions& options = {}, Progress* progress = nullptr,
                              FileIo& io = current_io());

}  // namespace ckptdoc::universal
