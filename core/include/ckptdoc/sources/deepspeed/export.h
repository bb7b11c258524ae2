#pragma once
// Weights-only export of a DeepSpeed checkpoint: by default exactly what DeepSpeed's zero_to_fp32.py
// produces (fp32 masters, buffers, frozen and shared params as that script treats them, module state-dict
// names), streamed one tensor at a time.
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/export_options.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::deepspeed {

// The tensors an export writes, in output order (buffers, frozen params, trainable params in param_shapes
// order, shared-param aliases; stage by stage for a pipeline), as lazily produced tensors: nothing is read
// until a writer pulls a tensor's bytes, and each tensor reads only its own slices of the rank files (a
// tensor-parallel merge holds one param's slices in memory while it is written). Throws ckptdoc::Error up
// front when a needed rank file is missing or unreadable, the source is not available for this checkpoint, or
// tensor-parallel slices cannot be merged (no rule for a param, slices that do not fit). `notes`, when given,
// receives the choices made (ExportResult::notes).
std::vector<NamedTensor> export_tensors(const Checkpoint& ckpt, const ExportOptions& options,
                                        Progress* progress = nullptr,
                                        std::vector<std::string>* notes = nullptr);

// Writes export_tensors() as safetensors ({"format": "pt"}), a torch.save file (an OrderedDict that loads
// with weights_only=True) or HDF5, atomically; with max_shard_size, as Hugging Face shards in a folder.
ExportResult export_weights(const Checkpoint& ckpt, const std::string& out_path, const ExportOptions& options,
                            Progress* progress = nullptr);

}  // namespace ckptdoc::deepspeed
