#pragma once
// PyTorch Distributed Checkpoint (DCP, torch.distributed.checkpoint) metadata: what the `.metadata` pickle of
// a DCP folder says every key holds and where its bytes are. Read with the inert unpickler: nothing in the
// file is imported or called (see ../shared/design/formats-2026.md, "PyTorch Distributed Checkpoint").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/format/pickle_safety.h"

namespace ckptdoc::dcp {

// One storage item: a complete torch.save zip at [offset, offset + length) of a `__<rank>_<n>.distcp` file,
// or (zstd) a zstd stream of one.
struct StorageItem {
  std::string file;  // relative to the checkpoint folder, as `_StorageInfo.relative_path` says
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string key;                     // the state-dict key (`MetadataIndex.fqn`) that names it
  std::vector<int64_t> chunk_offsets;  // `MetadataIndex.offset`: where its chunk starts (tensors)
  // Transform "stream.zstd/1" (torch's ZStandard extension): the range is zstd, decoding to at most
  // `max_decoded` bytes (the chunk's tensor bytes plus torch.save's zip around them; a cap for bytes items).
  bool zstd = false;
  uint64_t max_decoded = 0;
};

// One n-D box of a tensor (`ChunkStorageMetadata`): the part one rank saved.
struct Chunk {
  std::vector<int64_t> offsets, sizes;
  std::optional<StorageItem> item;  // from `storage_data`; nullopt when the metadata names none
  // Per-rank saves (merge_rank_metadata): the same box as written by higher ranks, which should hold the
  // same.
  std::vector<StorageItem> replicas;
  int64_t numel() const;
};

enum class EntryKind : uint8_t { Tensor, Bytes };

// One flattened state-dict key (`state_dict_metadata`).
struct Entry {
  std::string key;
  EntryKind kind = EntryKind::Tensor;
  std::string dtype;                        // tensors: torch's spelling ("float32", "bfloat16")
  std::vector<int64_t> size;                // tensors: the global shape ([] for a 0-d tensor)
  std::vector<Chunk> chunks;                // tensors
  std::optional<StorageItem> bytes_item;    // bytes items (a torch.save of any object)
  std::vector<StorageItem> bytes_replicas;  // per-rank saves: the other ranks' copies of the bytes item
  // Its place in the file's `state_dict_metadata` (the writer's plan order; `entries` are sorted by key),
  // kept from the one read of the pickle. Merged per-rank metadata keeps the place in the file that named it
  // first.
  size_t stored_index = 0;
  // megatron-core up to 0.15 saves a flattened-range ShardedTensor (a DistributedOptimizer's model-space
  // state) "nd-flattened": `size` is then the fragments along each axis of the original shape and, last, the
  // elements of one fragment; this is the original global shape (its MCoreMetadata's mcore_data[key]
  // ["nd_reformulated_orig_global_shape"]). Empty: stored as it is.
  std::vector<int64_t> nd_flattened_from;
  int64_t numel() const;  // tensors: product of size
};

struct Metadata {
  std::string path;  // the .metadata file (the lowest rank's when merged from per-rank files)
  // The per-rank `__<rank>.metadata` files merged into this one (merge_rank_metadata); empty for a
  // `.metadata`.
  std::vector<std::string> merged_from;
  std::string version;         // `Metadata.version` ("1.0.0"); empty when the writer had none
  std::vector<Entry> entries;  // sorted by key
  // `storage_data` items no entry's chunk names (a chunk removed from `state_dict_metadata`): "key @
  // offsets".
  std::vector<std::string> unreferenced_items;
  // What a plain pickle.load of the file would import and call beyond DCP's own classes (warnings only:
  // errors make read_metadata throw).
  std::vector<PickleHazard> hazards;

  const Entry* find(const std::string& key) const;
};

// Reads a `.metadata` file. Throws ckptdoc::Error naming the file: UnsafePickle when loading it in Python
// would run code (the hazard and why), Corrupt when it is not a DCP Metadata, NotFound/Io when unreadable.
Metadata read_metadata(const std::string& path);

// Whether a file name is a per-rank metadata file's, `__<rank>.metadata` (rank in decimal digits).
bool is_rank_metadata_name(const std::string& name);

// The per-rank metadata files of `dir` (`__<rank>.metadata`, what `dcp.save(..., use_collectives=False)`
// writes instead of `.metadata`: torch 2.10 filesystem.py, FileSystemWriter.finish), by rank; empty when
// there are none.
std::vector<std::string> rank_metadata_files(const std::string& dir);

// The whole checkpoint from per-rank metadata: each rank's file names only what that rank wrote, and items
// every rank holds (replicated tensors, bytes items) are written by each. One entry per key, each chunk box
// once (the lowest rank's item; the others' in `replicas` / `bytes_replicas`), the ranks' files in
// `merged_from`. Throws ckptdoc::Error Inconsistent naming both files when two ranks disagree on a key's
// kind, dtype or global shape.
Metadata merge_rank_metadata(std::vector<Metadata> ranks);

// A DCP folder: a directory holding `.metadata`, a `__<rank>.metadata` or a `*.distcp` file (a save that
// never wrote its `.metadata` is still DCP, so that ckptdoc can say what is missing).
bool is_dcp_folder(const std::string& path);

}  // namespace ckptdoc::dcp
