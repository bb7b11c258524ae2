#pragma once
// Hugging Face-style sharded weights: which tensor goes into which file, and writing the folder.
//
// The assignment is the one huggingface_hub's split_torch_state_dict_into_shards makes (and so what
// DeepSpeed's zero_to_fp32.py --max_shard_size writes): tensors are taken in order and added to the current
// shard until the next one would push it past the limit; a tensor larger than the limit gets a shard of its
// own at once (before the shard being filled); tensors that share a storage are sized once and follow the
// first of them into its shard, after that shard's own tensors. Tensors of zero bytes count as one shared
// storage (torch gives them all data pointer 0). One shard is named `model.safetensors` / `pytorch_model.bin`
// and has no index; more are `model-00001-of-0000N.safetensors` ... with `model.safetensors.index.json`
// ({"metadata": {"total_size": N}, "weight_map": {name: file}}, sorted keys, two-space indent, as
// zero_to_fp32.py writes it).
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/format/safetensors.h"  // NamedTensor

namespace ckptdoc::weights {

// "5GB" = 5e9 bytes, "5GiB" = 5 * 2^30 (also KB/MB/TB and KiB/MiB/TiB, case-insensitive unit, decimal values
// such as "1.5GB"), or a plain number of bytes. Throws ckptdoc::Error (location `option`) otherwise.
uint64_t parse_shard_size(const std::string& text, const std::string& option = "--max-shard-size");

enum class ShardFormat : uint8_t { Safetensors, Torch };
std::string weights_name(ShardFormat f);  // "model.safetensors" | "pytorch_model.bin"
std::string index_name(ShardFormat f);    // "model.safetensors.index.json" | "pytorch_model.bin.index.json"

struct ShardPlan {
  struct Shard {
    std::string file;             // name inside the folder
    std::vector<size_t> tensors;  // indices into the planned list, in the order they are written
    uint64_t bytes = 0;           // tensor bytes the shard stores
  };
  std::vector<Shard> shards;
  uint64_t total_size = 0;  // metadata.total_size: tensor bytes stored in all shards
  bool sharded() const { return shards.size() > 1; }
};

// Plans the shards of `tensors` (in their order) under `max_shard_size` bytes. In torch output tensors that
// share a storage are stored once; safetensors has no sharing, so a shared tensor is stored again beside its
// owner and counted in total_size (zero_to_fp32.py --safe_serialization refuses such models instead).
ShardPlan plan_shards(const std::vector<NamedTensor>& tensors, uint64_t max_shard_size, ShardFormat format);

// The index file's text for a plan.
std::string index_json(const std::vector<NamedTensor>& tensors, const ShardPlan& plan);

struct ShardedOutput {
  std::string folder;
  std::vector<std::string> files;    // written, in order (the index last)
  std::vector<std::string> removed;  // stale weights files of the same family replaced with --force
  uint64_t bytes = 0;
};

// Writes the planned shards (and the index when there are several) into `folder`. A folder that does not
// exist (or is empty) is built beside it and renamed into place, so it appears whole or not at all. An
// existing folder may hold other files (config.json, a tokenizer); weights files of the same family already
// there are refused unless `force`, and then replaced: new shards first, the index after them, stale shards
// last. Torch shards are plain dicts that load with weights_only=True; safetensors shards carry {"format":
// "pt"}. Safetensors shards are laid out as safetensors' save_file lays them out (sort_as_safetensors_saves):
// byte for byte the shards zero_to_fp32.py --safe_serialization writes.
ShardedOutput write_shards(const std::vector<NamedTensor>& tensors, const ShardPlan& plan,
                           const std::string& folder, ShardFormat format, bool force);

}  // namespace ckptdoc::weights
