#pragma once
// A PyTorch Distributed Checkpoint folder opened for reading: its metadata, and each storage item's
// torch.save zip read in place over a view of its `.distcp` file (mapped once, never copied, never written).
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ckptdoc/format/safetensors.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/value.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/dcp/metadata.h"

namespace ckptdoc::dcp {

class Checkpoint {
 public:
  // Reads `dir`/.metadata, or without it every per-rank `__<rank>.metadata` merged (read_metadata's and
  // merge_rank_metadata's errors); the storage files are opened when first read.
  static std::shared_ptr<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const Metadata& metadata() const { return metadata_; }
  // Every storage file the metadata names (other ranks' copies included), sorted.
  std::vector<std::string> storage_files() const;
  // The storage file mapped (once). Throws ckptdoc::Error NotFound naming the file when it is absent.
  std::shared_ptr<const MappedFile> file(const std::string& name) const;
  // The torch.save zip of one item. Throws ckptdoc::Error naming the file and item: NotFound (no such file),
  // Truncated (the item runs past the file's end), Corrupt (not a torch.save zip).
  // A tensor item of a file saved with serialization_format=SAFETENSORS comes back as a TorchFile whose root
  // is that tensor (a view on the file's safetensors part; no zip, so no CRC); Inconsistent when the part
  // holds no tensor of the key or one of another byte length.
  TorchFile open_item(const StorageItem& item) const;
  // Whether `item` is a tensor in a safetensors-serialized file (no torch.save zip of its own).
  bool in_safetensors(const StorageItem& item) const;
  // One chunk of a tensor entry, checked against the metadata: Inconsistent when the stored tensor's dtype or
  // shape is not the chunk's (the error names the file, the item and both).
  Tensor read_chunk(const Entry& entry, const Chunk& chunk) const;
  // The same check on an item already opened with open_item.
  static Tensor chunk_tensor(const Entry& entry, const Chunk& chunk, const TorchFile& tf);
  // The whole tensor in row-major order, converted to double (for small tensors: tests, reports). Throws when
  // a chunk is missing or unreadable.
  std::vector<double> read_global(const Entry& entry) const;

 private:
  std::string dir_;
  Metadata metadata_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::shared_ptr<const MappedFile>> files_;
  // serialization_format=SAFETENSORS: each such file's name and where its safetensors part starts; the
  // parts read so far, each with its tensors by name (every item of the file looks one up).
  struct SafetensorsPart {
    SafetensorsFile file;
    std::map<std::string, const SafetensorsEntry*> by_name;
  };
  std::map<std::string, uint64_t> safetensors_starts_;
  mutable std::map<std::string, std::shared_ptr<const SafetensorsPart>> safetensors_;
  TorchFile safetensors_item(const StorageItem& item, const std::shared_ptr<const MappedFile>& whole,
                             const std::string& path) const;
};

// "file [offset O, N bytes]": how messages name a storage item.
std::string item_name(const StorageItem& item);

}  // namespace ckptdoc::dcp
