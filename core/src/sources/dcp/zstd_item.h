#pragma once
// DCP storage items written through torch's ZStandard extension (FileSystemWriter(_extensions=[ZStandard()]),
// transform descriptor "stream.zstd/1"): each item's range is a zstd stream of what would otherwise be stored
// there (a torch.save zip). Decoded in memory, never past a bound the metadata gives.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ckptdoc::dcp {

// Whether a transform descriptor is torch's ZStandard of a version this reader decodes ("stream.zstd/1",
// torch's ZStandard.from_descriptor accepts any "1.x" too).
bool is_zstd_descriptor(const std::string& descriptor);

// The most bytes a tensor chunk's torch.save zip may decode to: its elements' bytes plus the zip's pickle,
// records and directory around them (torch.save of one tensor adds well under a kilobyte).
uint64_t max_decoded_tensor_item(uint64_t data_bytes);
// The same for a bytes item (a torch.save of any object), whose decoded size .metadata does not record.
uint64_t max_decoded_bytes_item();

// Decodes `stream` (every frame in it) into at most `max_size` bytes. Throws ckptdoc::Error Corrupt naming
// `path` and `where` when the stream is not zstd, is cut short (a frame unfinished at its end), or would
// decode to more than `max_size` bytes (decoding stops there: the output never grows past the bound).
std::vector<uint8_t> decode_zstd_item(std::span<const uint8_t> stream, uint64_t max_size,
                                      const std::string& path, const std::string& where);

}  // namespace ckptdoc::dcp
