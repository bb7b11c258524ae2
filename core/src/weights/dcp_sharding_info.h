#pragma once
// safetensors files written by torch's HuggingFaceStorageWriter carry DCP_SHARDING_INFO in __metadata__: each
// tensor's "saved_offsets" in the global tensor. A sharded save (save_distributed=True, each rank's
// shard-0000r-model-….safetensors) stores a rank's piece under the tensor's own name, so the file reads as
// whole tensors of the wrong shape unless the pieces are assembled, which ckptdoc does not do yet.
#include <map>
#include <optional>
#include <string>

namespace ckptdoc::weights {

// The first tensor of `metadata`'s DCP_SHARDING_INFO saved at a non-zero offset (a piece, not the whole
// tensor), as "'name' at [o0, o1]"; nullopt when there is no such entry. Throws ErrorKind::Corrupt (naming
// `path`) when DCP_SHARDING_INFO is not the JSON torch writes.
std::optional<std::string> dcp_piece_in(const std::map<std::string, std::string>& metadata,
                                        const std::string& path);

}  // namespace ckptdoc::weights
