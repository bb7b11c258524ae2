#pragma once
// safetensors files written by torch's HuggingFaceStorageWriter carry DCP_SHARDING_INFO in __metadata__: each
// tensor's "saved_offsets" in the global tensor. A sharded save (save_distributed=True, each rank's
// shard-0000r-model-….safetensors) stores a rank's piece under the tensor's own name and records no tensor's
// whole shape anywhere (no index, no .metadata), so a piece at offset 0 looks like a whole tensor.
#include <map>
#include <optional>
#include <string>

namespace ckptdoc::weights {

// The entry of DCP_SHARDING_INFO that shows what a file holds, as "'name' at [o0, o1]".
struct DcpPiece {
  std::string described;
  bool at_offset = false;  // saved at a non-zero offset: certainly part of a larger tensor
};

// The first tensor of `metadata`'s DCP_SHARDING_INFO saved at a non-zero offset, else its first tensor;
// nullopt when there is no DCP_SHARDING_INFO or it names no tensor. Throws ErrorKind::Corrupt (naming `path`)
// when DCP_SHARDING_INFO is not the JSON torch writes.
std::optional<DcpPiece> dcp_piece_in(const std::map<std::string, std::string>& metadata,
                                     const std::string& path);

}  // namespace ckptdoc::weights
