#pragma once
// Which serialization a DCP folder's `.distcp` files use. torch >= 2.8 can write them as safetensors
// (FileSystemWriter(serialization_format=SerializationFormat.SAFETENSORS)); `.metadata` does not say so (its
// storage items all read offset 0), only the files' own header does.
#include <string>
#include <vector>

namespace ckptdoc::dcp {

// Throws ErrorKind::Unsupported naming the first of `files` (names inside `dir`) that is a safetensors file
// rather than torch.save items: its items cannot be read at the offsets `.metadata` gives. Files that are
// missing or too short to tell are left to diagnose, which names them.
void refuse_safetensors_serialization(const std::string& dir, const std::vector<std::string>& files);

}  // namespace ckptdoc::dcp
