#pragma once
// Which serialization a DCP folder's `.distcp` files use. torch >= 2.8 can write them as safetensors
// (FileSystemWriter(serialization_format=SerializationFormat.SAFETENSORS)); `.metadata` does not say so, only
// the files' own bytes do. torch 2.10's filesystem.py (_write_files_from_queue, _write_item) writes such a
// file as its bytes items first (each a torch.save of its object at its own offset, as usual), then one
// safetensors file holding every tensor chunk of the file under its key (`MetadataIndex.fqn`), with
// DCP_SHARDING_INFO (each key's saved_offsets) in its __metadata__. Each tensor item's `_StorageInfo` gives
// the offset where that safetensors file starts (the same for all of them: nothing was written between) and
// the length of the tensor's own bytes (numel x element size), not the range of its data.
#include <cstdint>
#include <map>
#include <string>

#include "ckptdoc/sources/dcp/metadata.h"

namespace ckptdoc::dcp {

// The storage files of `md` (inside `dir`) whose tensor items lie in a safetensors file, each with the offset
// that file starts at. A file is one when the bytes at its tensor items' lowest offset are a safetensors
// header. Throws ckptdoc::Error naming the file: Unsupported when its tensor items also carry a zstd
// transform (torch wrote an empty frame per tensor before the safetensors file), Corrupt when they do not all
// name that one offset or one key holds two chunks in it. Files missing or too short to tell are left to
// diagnose, which names them.
std::map<std::string, uint64_t> safetensors_serialized_files(const std::string& dir, const Metadata& md);

}  // namespace ckptdoc::dcp
