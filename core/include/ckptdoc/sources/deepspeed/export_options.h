#pragma once
// What an export is asked and what it wrote (export.h runs it): the options and results alone, for the
// session and the views, which pass them on without reading a checkpoint's catalog.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/dtype.h"

namespace ckptdoc::deepspeed {

enum class ExportFormat : uint8_t { Safetensors, Torch, Hdf5 };
enum class ExportSource : uint8_t { Fp32, Lp };
ExportFormat parse_export_format(const std::string& s);  // "safetensors" | "torch" | "hdf5"
ExportSource parse_export_source(const std::string& s);  // "fp32" | "lp"

struct ExportOptions {
  ExportFormat format = ExportFormat::Safetensors;
  std::optional<DType> dtype;  // default float32 for fp32 source, the lp dtype for lp source
  ExportSource source = ExportSource::Fp32;
  bool exclude_frozen = false;
  // Where float32 <-> float16/bfloat16 conversions run (the backend's upcast/downcast, bit-exact on both).
  DeviceKind device = DeviceKind::Auto;
  // Hugging Face-style shards of at most this many bytes each in a folder (weights/shards.h); unset: one
  // file.
  std::optional<uint64_t> max_shard_size;
  bool force = false;  // replace an existing output file, or weights files already in the sharded folder
  // Tensor/pipeline-parallel jobs: every pipeline stage is exported (names are unique across stages; a tied
  // module saved by several stages once). With tensor parallelism, tp_rank >= 0 writes that rank's slices as
  // they are; else the ranks are merged by the rules of `tp_rules` (a rule file) or the checkpoint's
  // universal_checkpoint_info (tp_rules.h), and a param without a rule is refused by name.
  int tp_rank = -1;
  std::optional<std::string> tp_rules;
  // A param the rules call replicated whose tensor ranks hold different values is refused by name (as
  // ds_to_universal.py refuses it) unless this is set: then the copy that most tensor ranks (at least three,
  // more than half) hold bit for bit is written, else tensor rank 0's.
  bool merge_differing_replicated = false;
  // Refuse to write NaN or Inf: the first one found fails the export (nothing is published) naming the
  // tensor.
  bool strict = false;
};

// A written tensor that holds NaN or Inf values (counted while its bytes were written).
struct NonFiniteTensor {
  std::string name;
  uint64_t nan = 0;
  uint64_t inf = 0;
  uint64_t numel = 0;
};

struct ExportResult {
  std::string path;
  size_t tensors = 0;
  uint64_t bytes = 0;
  std::vector<std::string> files;  // sharded output: the files written in the folder (the index last)
  std::vector<NonFiniteTensor> non_finite;  // in output order; empty when every value written is finite
  std::vector<std::string>
      notes;  // choices the export made that the user should know (merge_differing_replicated)
  // sharded output of a model folder (a Trainer checkpoint-N/): its config and tokenizer files copied beside
  // the weights (weights/model_companions.h)
  std::vector<std::string> companions;
};

}  // namespace ckptdoc::deepspeed
