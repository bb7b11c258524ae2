#pragma once
// What a self-reporting source (one that does not read into the catalog: DCP, Accelerate, Megatron-core)
// gives the views, in neutral terms (#27: views never ask which kind of source is open). The storage map is
// read from metadata only: the files with the items each holds (byte ranges), and every stored key with its
// shape, dtype and chunks. The diagnosis is the findings `ckptdoc diagnose` reports for the same path, with
// the same codes and words.
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"

namespace ckptdoc::sources {

// One item in a storage file: a tensor chunk (its box in the global shape) or a bytes item (no box).
struct StoredItem {
  std::string key;
  std::vector<int64_t> offsets, sizes;  // tensor chunks only
  uint64_t offset = 0, length = 0;      // bytes of the file it occupies
  bool tensor = true;
};

// One storage file the metadata names, relative to the opened folder ("optimizer_0/__1_0.distcp").
struct StorageFile {
  std::string name;
  bool present = false;           // on disk now
  uint64_t size = 0;              // on disk (0 when absent)
  uint64_t extent = 0;            // the end of its last item, as the metadata says
  std::vector<StoredItem> items;  // by offset
};

// Where one chunk of a key lives.
struct ChunkPlace {
  std::string file;  // as StorageFile::name; empty when the metadata names no storage item
  std::vector<int64_t> offsets, sizes;
  uint64_t offset = 0, length = 0;
};

// One stored key.
struct StoredKey {
  std::string key;
  bool tensor = true;
  std::string dtype;               // tensors: torch's spelling
  std::vector<int64_t> shape;      // tensors: the global shape
  std::vector<ChunkPlace> chunks;  // tensors: each chunk; bytes items: their one item
};

struct StorageMap {
  std::string format;  // as `inspect --json` names it: "pytorch-dcp", "accelerate-fsdp", "megatron-core"
  std::string path;    // the folder read
  std::vector<StorageFile> files;  // by name
  std::vector<StoredKey> keys;     // in metadata order (parts in folder order)
};

struct SourceDiagnosis {
  std::vector<analysis::Finding> findings;  // as diagnose --json's problems: errors first
  std::string verdict;                      // diagnose's verdict sentence
  bool clean = false;
  std::vector<std::string> not_checked;
};

}  // namespace ckptdoc::sources
