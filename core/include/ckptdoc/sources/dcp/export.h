#pragma once
// `ckptdoc export` of a PyTorch Distributed Checkpoint: the model weights as Hugging Face safetensors (one
// file, or shards with an index), each tensor assembled from its chunks into its global row-major shape in
// its stored dtype, one tensor at a time. What `torch.distributed.checkpoint.format_utils.dcp_to_torch_save`
// loads for the same keys, bit for bit.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/format/safetensors.h"  // NamedTensor
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/sources/deepspeed/export.h"  // NonFiniteTensor
#include "ckptdoc/task/progress.h"

namespace ckptdoc::dcp {

// Optimizer state: keys under `optimizer.`, or under `chained_<i>.optimizer.`, where megatron-core's
// ChainedOptimizer (a mixture-of-experts model's dense and expert DistributedOptimizers) prefixes each one's
// bucket-space state (optimizer/optimizer.py ChainedOptimizer.sharded_state_dict, 0.16.1).
bool is_optimizer_key(const std::string& key);

// Optimizer state (is_optimizer_key) and keys under `lr_scheduler.`, `scheduler.`, `dataloader.` or
// `train_state.` (torchtitan's and FSDP2's state beside the model) are not weights; every other tensor key
// is.
bool is_model_key(const std::string& key);

struct WeightsSelection {
  // In metadata (key) order, lazily produced: nothing is read until a writer pulls a tensor's bytes.
  std::vector<NamedTensor> tensors;
  size_t state_tensors_left_out = 0;  // optimizer / scheduler / dataloader / train-state tensors
  size_t bytes_items_left_out = 0;    // pickled objects: never weights
  // "model." when every weight key had it (Accelerate's `pytorch_model_fsdp_0/` saves {"model": sd}) and it
  // was stripped from the names written; empty otherwise.
  std::string stripped_prefix;
};

// The weights of `ckpt`. Throws ckptdoc::Error naming the key before anything is written: Inconsistent when a
// tensor's chunks do not tile its shape (a gap, an overlap, a chunk outside: tiling_problems), NotFound when
// a chunk has no storage item, Unsupported for a dtype safetensors cannot hold; NotFound when no key is a
// weight. A chunk whose stored tensor is not what .metadata says fails the writer, naming its file and key.
WeightsSelection select_weights(const Checkpoint& ckpt);

// The Adam moment `moment` ("exp_avg" or "exp_avg_sq") of every param that has one, each named by its param
// as select_weights names it ("model." stripped when every name has it): `optimizer.state.<param>.<moment>`
// (torch's flattened optimizer state: FSDP2, torchtitan, Accelerate) or `optimizer.state.<moment>.<param>`
// (Megatron-core's model-space layouts). The same refusals as select_weights; NotFound when there is none.
WeightsSelection select_moments(const Checkpoint& ckpt, const std::string& moment);

struct ExportOptions {
  std::optional<uint64_t>
      max_shard_size;  // Hugging Face shards in a folder (weights/shards.h); unset: one file
  bool force = false;  // replace an existing output file, or weights files already in the sharded folder
  bool torch = false;  // torch.save output: one file holding a dict (what dcp_to_torch_save writes), or torch
                       // shards (pytorch_model-0000i-of-0000N.bin + index) with max_shard_size
  bool strict = false;  // a NaN or Inf value fails the export (nothing published), naming the tensor
  // The folder the user named when it holds more than `ckpt`'s own (an Accelerate save_state folder, a
  // Megatron save folder): the output may not be inside it either. Empty: `ckpt`'s folder.
  std::string input_folder = {};
  // Counts the bytes written (stage "writing N weights") and stops at a cancel between steps of a few MiB:
  // Cancelled is thrown and nothing is published. Null: neither.
  Progress* progress = nullptr;
};

struct ExportResult {
  std::string path;
  size_t tensors = 0;
  uint64_t bytes = 0;
  std::vector<std::string> files;  // sharded output: the files written in the folder (the index last)
  size_t state_tensors_left_out = 0;
  size_t bytes_items_left_out = 0;
  std::string stripped_prefix;
  std::vector<deepspeed::NonFiniteTensor> non_finite;  // written tensors holding NaN or Inf, in output order
};

// Writes select_weights() as safetensors ({"format": "pt"}) atomically, or as shards with max_shard_size,
// counting NaN/Inf as the bytes pass (the DeepSpeed export's watch). The output may not be inside the
// checkpoint folder, and an existing file is replaced only with `force` (InvalidRequest / OutputExists naming
// --output).
ExportResult export_weights(const Checkpoint& ckpt, const std::string& out_path,
                            const ExportOptions& options);

}  // namespace ckptdoc::dcp
