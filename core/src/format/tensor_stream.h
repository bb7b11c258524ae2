#pragma once
// Internal to core: a tensor's elements in row-major order, for writers that stream tensors to a file
// (safetensors, HDF5). Works from the struct fields alone (mapped, owned or produced storages, any strides),
// checking every byte range against the storage before touching it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ckptdoc/format/value.h"
#include "ckptdoc/io/file_io.h"

namespace ckptdoc::detail {

// Number of elements, validated: non-negative dimensions, strides (when set) matching the rank, and a byte
// count that fits 64 bits. Errors name `file` and the tensor.
uint64_t checked_numel(const std::string& file, const std::string& name, const Tensor& t);

// The tensor's bytes without copying when it is row-major over mapped or owned bytes; nullopt otherwise
// (strided views, producer-only storages). Throws when the tensor needs bytes beyond its storage.
std::optional<std::span<const uint8_t>> row_major_view(const std::string& file, const std::string& name,
                                                       const Tensor& t);

// Writes exactly numel * element_size bytes of the tensor in row-major order: directly for row-major
// tensors, through the producer for produced storages, gathered into one buffer for strided views.
void stream_row_major(const std::string& file, const std::string& name, const Tensor& t, ByteSink& sink);

}  // namespace ckptdoc::detail
